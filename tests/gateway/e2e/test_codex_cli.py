"""The real Codex CLI pointed at the gateway as a custom provider (its
``config.toml``, as ``docs/flows/gateway.md`` shows) with a gateway key: served on a
ChatGPT/Codex plan, then walked to the OpenAI platform key when every plan refuses.
The CLI reaches nothing but the gateway (every proxy is a trap)."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from gateway.models import GatewayUsage
from simulator.control import SimulatorControl
from tests.clis import QUIET, ProxyTrap, codex_cli, search_path
from tests.execution.support import register_codex_plan
from tests.gateway.e2e.support import Gateway, issue, wait_for
from tests.session_canary import MARKER
from trinity import services as trinity_services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PLAN_PATH = "/backend-api/codex/responses"


@pytest.fixture(scope="module")
def proxy_trap() -> Iterator[ProxyTrap]:
    trap = ProxyTrap()
    yield trap
    trap.close()


def gateway_config(url: str) -> str:
    return f"""model_provider = "trinity"
model = "gpt-5.5-codex"
[model_providers.trinity]
name = "Trinity gateway"
base_url = "{url}/v1"
env_key = "TRINITY_GATEWAY_KEY"
wire_api = "responses"
supports_websockets = false
{QUIET}"""


def run_codex(gw: Gateway, key: str, home: Path, trap: ProxyTrap) -> list[dict[str, Any]]:
    codex_home = home / "codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(gateway_config(gw.url))
    env = {
        "HOME": str(home),
        "PATH": search_path(),
        "CODEX_HOME": str(codex_home),
        "TRINITY_GATEWAY_KEY": key,
        **{name: trap.url for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")},
        "NO_PROXY": "127.0.0.1,localhost",
    }
    done = subprocess.run(
        [codex_cli(), "exec", "--json", "--skip-git-repo-check", "say hi"],
        env=env,
        cwd=home,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert trap.requests == [], f"the CLI called past the gateway: {trap.requests}"
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert [e for e in events if e.get("type") == "turn.completed"], events
    return events


def sent(control: SimulatorControl) -> list[tuple[str, str | None, int]]:
    return [(r["path"], r["credential"], r["status"]) for r in control.requests()]


def test_the_codex_cli_is_served_on_a_plan_then_walked_to_the_openai_key(
    gw: Gateway, control: SimulatorControl, person: User, tmp_path: Path, proxy_trap: ProxyTrap
) -> None:
    _, plan_token = register_codex_plan(control, "gpt-a")
    key = issue(person)

    run_codex(gw, key, tmp_path, proxy_trap)
    assert sent(control) == [(PLAN_PATH, "gpt-a", 200)]

    control.set_usage(plan_token, "five_hour", percent=100)
    openai_key = f"sk-proj-{MARKER}{secrets.token_hex(12)}"
    control.register(openai_key, kind="openai_key", label="openai-key", credit_usd=50)
    trinity_services.platform_api_key_set(key=openai_key, provider="openai-codex")
    control.clear_requests()

    run_codex(gw, key, tmp_path, proxy_trap)
    assert sent(control) == [(PLAN_PATH, "gpt-a", 429), ("/v1/responses", "openai-key", 200)]
    rows = wait_for(
        lambda: (
            list(GatewayUsage.objects.filter(key__owner=person).order_by("at"))
            if GatewayUsage.objects.filter(key__owner=person).count() == 2
            else None
        )
    )
    assert [(r.served_by_name, r.attempts) for r in rows] == [
        ("gpt-a", 1),
        ("OpenAI platform key", 2),
    ]
