"""`make run` listens where PORT and SIMULATOR_PORT say, and every URL it prints
follows them; a bad value stops the process naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import override_settings
from honcho.environ import expand_processes, parse_procfile

from tests.agents.factories import UserFactory

ROOT = Path(__file__).resolve().parents[2]


def _boot(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PORT", "SIMULATOR_PORT"}}
    env.update({"DJANGO_SETTINGS_MODULE": "trinity.settings", "TRINITY_VAR_DIR": str(tmp_path)})
    env.update(overrides)
    code = "import django; django.setup(); from django.conf import settings; "
    code += "print(settings.PORT, settings.SIMULATOR_PORT)"
    return subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [("PORT", "eighty"), ("PORT", "0"), ("SIMULATOR_PORT", "70000"), ("SIMULATOR_PORT", "x")],
)
def test_a_bad_port_fails_loudly_naming_the_variable(
    tmp_path: Path, variable: str, value: str
) -> None:
    result = _boot(tmp_path, **{variable: value})
    assert result.returncode != 0
    assert f"{variable}=" in result.stderr


def test_the_ports_default_to_8000_and_8100_and_follow_the_environment(tmp_path: Path) -> None:
    assert _boot(tmp_path).stdout.split() == ["8000", "8100"]
    assert _boot(tmp_path, PORT="9123", SIMULATOR_PORT="9124").stdout.split() == ["9123", "9124"]


@pytest.mark.django_db
def test_ensure_admin_prints_the_url_on_the_configured_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with override_settings(PORT=9123, VAR_DIR=tmp_path):
        call_command("ensure_admin")
    assert "log in at http://127.0.0.1:9123/ as 'admin'" in capsys.readouterr().out


@pytest.mark.django_db
def test_seed_demo_prints_a_curl_and_the_simulator_on_the_configured_ports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    UserFactory.create(username="admin", is_staff=True)
    with override_settings(
        PORT=9123, VAR_DIR=tmp_path, TRINITY_ANTHROPIC_BASE_URL="http://127.0.0.1:9124"
    ):
        call_command("seed_demo", seed_file=str(tmp_path / "seed.json"))
    out = capsys.readouterr().out
    assert "curl -s -X POST http://127.0.0.1:9123/api/agents/demo-agent/task" in out
    assert "simulator at http://127.0.0.1:9124" in out
    assert "curl -s -X POST http://127.0.0.1:9123/api/agents/demo-codex-agent/task" in out


@pytest.mark.django_db
def test_seed_demo_seeds_a_codex_plan_the_simulator_knows_and_a_codex_agent_on_it(
    tmp_path: Path,
) -> None:
    from agents.models import Agent
    from simulator.seed import load_seed
    from simulator.state import Simulator
    from subscriptions.codex_refresh import codex_tokens

    UserFactory.create(username="admin", is_staff=True)
    seed = tmp_path / "seed.json"
    with override_settings(VAR_DIR=tmp_path):
        call_command("seed_demo", seed_file=str(seed))
        call_command("seed_demo", seed_file=str(seed))  # idempotent
    agent = Agent.objects.get(name="demo-codex-agent")
    assert (agent.runtime, agent.provider) == ("codex-cli", "openai-codex")
    assert agent.subscription is not None and agent.subscription.name == "demo-codex"
    credential = codex_tokens(agent.subscription.token)
    sim = Simulator()
    assert load_seed(sim, seed) == 3
    known = sim.lookup(credential.access_token)
    assert (known.kind, known.account_id) == ("codex", credential.account_id)
    assert credential.refresh_token in sim.refresh_grants


def test_the_dev_procfile_serves_web_and_the_simulator_on_the_configured_ports() -> None:
    """Expanded the way `make run` starts it: honcho, base port PORT, then the shell."""
    procfile = parse_procfile((ROOT / "deploy" / "Procfile.dev").read_text())
    env = {"PATH": os.environ["PATH"], "PORT": "9123", "SIMULATOR_PORT": "9124"}
    expanded = {
        params.name: subprocess.run(  # noqa: S603 - fixed argv
            ["bash", "-c", f"echo {params.cmd}"],  # noqa: S607
            env=params.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for params in expand_processes(procfile.processes, env=env, port=9123)
    }
    web = expanded["web.1"].split()
    assert "trinity.asgi:application" in web
    assert web[web.index("--host") + 1 :][:3] == ["127.0.0.1", "--port", "9123"]
    assert "--reload" not in web
    assert "--port 9124 " in expanded["simulator.1"]


def test_make_run_hands_both_ports_to_the_processes_it_starts() -> None:
    result = subprocess.run(
        ["make", "-n", "run", "PORT=9123", "SIMULATOR_PORT=9124"],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "TRINITY_ANTHROPIC_BASE_URL=http://127.0.0.1:9124" in result.stdout
    assert "honcho -f deploy/Procfile.dev start -p 9123" in result.stdout
