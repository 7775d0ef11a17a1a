"""The real Claude Code CLI pointed at the gateway with only ``ANTHROPIC_BASE_URL`` and
a gateway key: a multi-request prompt (a tool call, then the answer) whose serving
plan is exhausted on the simulator between its two requests finishes without an
error; the simulator saw the second plan's token, and the session switched and was
noticed exactly once."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from gateway.models import GatewaySession
from simulator.control import SimulatorControl
from tests.clis import claude_cli
from tests.execution.support import register_plan
from tests.gateway.e2e.support import Gateway, issue, wait_for
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CLI_SECONDS = 120


def cli_env(gw: Gateway, key: str, home: Path) -> dict[str, str]:
    node = shutil.which("node")
    path = os.pathsep.join(
        p
        for p in (os.path.dirname(node) if node else None, "/usr/local/bin", "/usr/bin", "/bin")
        if p
    )
    return {
        "HOME": str(home),
        "PATH": path,
        # The two lines a person sets (docs/flows/gateway.md), and nothing else of ours.
        "ANTHROPIC_BASE_URL": gw.url,
        "ANTHROPIC_API_KEY": key,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
    }


def served(control: SimulatorControl) -> list[tuple[str | None, int]]:
    return [
        (r["credential"], r["status"]) for r in control.requests() if r["path"] == "/v1/messages"
    ]


def test_the_cli_finishes_a_multi_request_prompt_across_a_plan_exhausted_mid_way(
    gw: Gateway, control: SimulatorControl, person: User, tmp_path: Path
) -> None:
    plans = {name: register_plan(control, name)[1] for name in ("max-a", "max-b")}
    key = issue(person)
    trigger = f"gateway-walk-{secrets.token_hex(4)}"
    # The model asks for one Bash call that takes a while: the plan runs out meanwhile.
    control.arm_red_team(trigger=trigger, reads=[], commands=["sleep 3; echo slept"])
    home = tmp_path / "home"
    home.mkdir()
    cli = subprocess.Popen(
        [claude_cli(), "-p", f"run the check {trigger}", "--output-format", "json",
         "--allowedTools", "Bash"],
        env=cli_env(gw, key, home),
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        first = wait_for(lambda: served(control)[0] if served(control) else None, seconds=60)
        assert first[1] == 200
        control.set_usage(plans[str(first[0])], "five_hour", percent=100)
        out, err = cli.communicate(timeout=CLI_SECONDS)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()

    result = json.loads(out.strip().splitlines()[-1])
    assert cli.returncode == 0 and result["is_error"] is False, (out, err)
    other = "max-b" if first[0] == "max-a" else "max-a"
    log = served(control)
    assert log[0] == first and log[1] == (first[0], 429) and log[2] == (other, 200), log
    assert all(entry == (other, 200) for entry in log[2:]), log
    assert control.red_team()["results"], "the tool ran between the two requests"
    session = wait_for(lambda: GatewaySession.objects.filter(key__owner=person, switches=1).first())
    assert session.subscription is not None
    assert session.subscription.name == other
    notices = wait_for(
        lambda: list(Notification.objects.filter(kind="gateway_session_switched")) or None
    )
    assert len(notices) == 1
