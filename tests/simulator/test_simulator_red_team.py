"""The scripted tool-using model (simulator/redteam.py): tool_use answers, the
recorded tool results, the quoting final answer; and the real CLI running its calls."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_server.config import resolve_claude_bin
from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess

TRIGGER = "red-team-probe-5c1e"
OAUTH = "sk-ant-oat01-redteam-plan-0000-aaaa"
HEADERS = {
    "anthropic-version": "2023-06-01",
    "authorization": f"Bearer {OAUTH}",
    "anthropic-beta": "oauth-2025-04-20",
}


def body(messages: list[dict[str, Any]], *, stream: bool = False) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "stream": stream,
        "messages": messages,
    }


def sse_events(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data: "))
        for line in text.splitlines()
        if line.startswith("data: ")
    ]


def test_a_triggered_request_gets_one_tool_call_per_path_and_command(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.arm_red_team(trigger=TRIGGER, reads=["/a/b", "/c"], commands=["env"])
    response = api.post(
        "/v1/messages?beta=true",
        headers=HEADERS,
        json=body([{"role": "user", "content": f"please {TRIGGER}"}]),
    )
    assert response.status_code == 200
    message = response.json()
    assert message["stop_reason"] == "tool_use"
    calls = [(b["type"], b["name"], b["input"]) for b in message["content"]]
    assert calls == [
        ("tool_use", "Read", {"file_path": "/a/b"}),
        ("tool_use", "Read", {"file_path": "/c"}),
        ("tool_use", "Bash", {"command": "env", "description": "inspect"}),
    ]
    assert control.red_team()["tool_calls"] == 3


def test_the_tool_calls_stream_as_input_json_deltas_and_stop_for_tool_use(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.arm_red_team(trigger=TRIGGER, reads=["/etc/hostname"])
    response = api.post(
        "/v1/messages?beta=true",
        headers=HEADERS,
        json=body([{"role": "user", "content": TRIGGER}], stream=True),
    )
    events = sse_events(response.text)
    start = next(e for e in events if e["type"] == "content_block_start")
    assert start["content_block"]["type"] == "tool_use"
    assert start["content_block"]["input"] == {}
    partial = "".join(
        e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"
    )
    assert json.loads(partial) == {"file_path": "/etc/hostname"}
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert events[-1]["type"] == "message_stop"


def test_the_tool_results_are_recorded_and_quoted_in_three_encodings(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.arm_red_team(trigger=TRIGGER, reads=["/x"])
    first = api.post(
        "/v1/messages", headers=HEADERS, json=body([{"role": "user", "content": TRIGGER}])
    ).json()
    call = first["content"][0]
    history = [
        {"role": "user", "content": TRIGGER},
        {"role": "assistant", "content": first["content"]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call["id"],
                    "content": [{"type": "text", "text": "FILE-CONTENT-77"}],
                }
            ],
        },
    ]
    final = api.post("/v1/messages", headers=HEADERS, json=body(history)).json()
    assert final["stop_reason"] == "end_turn"
    answer = final["content"][0]["text"]
    assert "FILE-CONTENT-77" in answer
    assert " ".join("FILE-CONTENT-77") in answer
    encoded = answer.split("base64: ", 1)[1].split()[0]
    assert "FILE-CONTENT-77" in base64.b64decode(encoded).decode()
    view = control.red_team()
    assert view["results"] == [
        {
            "tool": "Read",
            "input": {"file_path": "/x"},
            "is_error": False,
            "content": "FILE-CONTENT-77",
        }
    ]
    assert view["answers"] == 1


def test_a_request_without_the_trigger_gets_the_echo_reply(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.arm_red_team(trigger=TRIGGER, reads=["/x"])
    message = api.post(
        "/v1/messages", headers=HEADERS, json=body([{"role": "user", "content": "say hi"}])
    ).json()
    assert message["content"] == [{"type": "text", "text": "Simulated reply: say hi"}]
    assert control.red_team()["tool_calls"] == 0


def test_an_exhausted_plan_is_refused_before_the_script_answers(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.set_usage(OAUTH, "five_hour", percent=100)
    control.arm_red_team(trigger=TRIGGER, reads=["/x"])
    response = api.post(
        "/v1/messages", headers=HEADERS, json=body([{"role": "user", "content": TRIGGER}])
    )
    assert response.status_code == 429
    assert control.red_team()["tool_calls"] == 0


def test_reset_and_delete_disarm_the_script(control: SimulatorControl) -> None:
    control.arm_red_team(trigger=TRIGGER, reads=["/x"])
    control.disarm_red_team()
    assert control.red_team() == {}
    control.arm_red_team(trigger=TRIGGER, reads=["/x"])
    control.reset()
    assert control.red_team() == {}


def test_a_trigger_too_short_to_be_unique_is_refused(control: SimulatorControl) -> None:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        control.arm_red_team(trigger="rt", reads=["/x"])
    assert refused.value.response.status_code == 422


# The real CLI runs the calls (Read takes file_path, Bash takes command).


@pytest.fixture
def run_claude(sim: SimulatorProcess, tmp_path: Path) -> Any:
    claude = shutil.which(resolve_claude_bin(os.environ))
    if claude is None:
        pytest.fail("no Claude Code CLI: run `make setup` (npm ci --prefix agent_server)")

    def run(workdir: Path, *args: str) -> dict[str, Any]:
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        node = shutil.which("node")
        path = os.pathsep.join(
            p for p in (os.path.dirname(node) if node else None, "/usr/bin", "/bin") if p
        )
        env = {
            "HOME": str(home),
            "PATH": path,
            "ANTHROPIC_BASE_URL": sim.base_url,
            "CLAUDE_CODE_OAUTH_TOKEN": OAUTH,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
        }
        done = subprocess.run(  # noqa: S603 - the pinned CLI
            [claude, "-p", "--output-format", "json", *args],
            input=f"{TRIGGER}: read them",
            env=env,
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert done.stdout.strip(), done.stderr
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    return run


@pytest.mark.e2e
def test_the_real_cli_runs_the_scripted_reads_and_answers_with_their_content(
    control: SimulatorControl, run_claude: Any, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "inside.txt").write_text("INSIDE-CONTENT-31\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE-CONTENT-42\n")
    control.arm_red_team(trigger=TRIGGER, reads=[str(workdir / "inside.txt"), str(outside)])

    result = run_claude(workdir)

    assert result["is_error"] is False
    by_path = {(r["input"] or {})["file_path"]: r for r in control.red_team()["results"]}
    assert "INSIDE-CONTENT-31" in by_path[str(workdir / "inside.txt")]["content"]
    # Outside the working directory Read needs approval, which print mode denies.
    assert by_path[str(outside)]["is_error"] is True
    assert "OUTSIDE-CONTENT-42" not in by_path[str(outside)]["content"]
    assert "INSIDE-CONTENT-31" in result["result"]
    assert control.red_team()["cwd"] == str(workdir)


@pytest.mark.e2e
def test_the_real_cli_runs_reads_and_bash_anywhere_once_they_are_allowed(
    control: SimulatorControl, run_claude: Any, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE-CONTENT-42\n")
    parent_environ = "tr '\\0' '\\n' < /proc/$PPID/environ"
    control.arm_red_team(
        trigger=TRIGGER, reads=[str(outside)], commands=[f"cat {outside}", "env", parent_environ]
    )

    result = run_claude(workdir, "--allowedTools", "Read,Bash")

    assert result["is_error"] is False
    results = control.red_team()["results"]
    assert [r["is_error"] for r in results] == [False, False, False, False]
    read, cat, env, cli_environ = results
    assert "OUTSIDE-CONTENT-42" in read["content"]
    assert "OUTSIDE-CONTENT-42" in cat["content"]
    # Seen on 2.1.332: the CLI strips its own token from the environment its Bash
    # tool gets, but the CLI's process (Bash's parent) still holds it, readable.
    assert OAUTH not in env["content"]
    assert f"CLAUDE_CODE_OAUTH_TOKEN={OAUTH}" in cli_environ["content"]
