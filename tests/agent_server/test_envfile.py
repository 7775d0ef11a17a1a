"""The server's environment from a file (`TRINITY_AGENT_ENV_FILE`, a swarm secret).

A good file's values become the environment and win; every kind of bad file stops
the boot naming the file and the fault, never quoting a value; and the CLI's
environment built on a file holds no more than one built on the process environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from agent_server.app import create_app
from agent_server.config import load_config
from agent_server.envfile import MAX_BYTES, EnvFileError, env_file_apply
from tests.agent_server.test_app import RecordingRuntime, make_config, task
from trinity_contract.proof import new_nonce, proof_matches

REPO = Path(__file__).resolve().parents[2]
SECRET = "agent-secret-from-the-file-0001"
OAT = "sk-ant-oat01-from-the-file-token-zzzz"


def write_private(path: Path, content: str | bytes, mode: int = 0o400) -> Path:
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


def env_file(tmp_path: Path, values: dict[str, str]) -> Path:
    return write_private(tmp_path / "trinity-agent-env", json.dumps(values))


def test_a_good_files_values_become_the_environment_and_win(tmp_path: Path) -> None:
    path = env_file(
        tmp_path,
        {"TRINITY_AGENT_SECRET": SECRET, "CLAUDE_CODE_OAUTH_TOKEN": OAT, "AGENT_EMPTY": ""},
    )
    environ = {
        "TRINITY_AGENT_ENV_FILE": str(path),
        "TRINITY_AGENT_SECRET": "the-process-environments-own",
        "TRINITY_AGENT_HOME": str(tmp_path),
        "PATH": "/usr/bin",
    }

    assert env_file_apply(environ) == path

    assert environ["TRINITY_AGENT_SECRET"] == SECRET
    assert environ["CLAUDE_CODE_OAUTH_TOKEN"] == OAT
    assert environ["AGENT_EMPTY"] == ""
    assert environ["PATH"] == "/usr/bin"  # what the file does not name stays
    assert load_config(environ).secret == SECRET


def test_without_the_variable_nothing_changes() -> None:
    environ = {"TRINITY_AGENT_SECRET": SECRET}
    assert env_file_apply(environ) is None
    assert environ == {"TRINITY_AGENT_SECRET": SECRET}


def _bad(tmp_path: Path, kind: str) -> Path:
    """A file of each bad kind, every one holding the credential somewhere."""
    path = tmp_path / "trinity-agent-env"
    contents: dict[str, str | bytes] = {
        "not JSON": '{"CLAUDE_CODE_OAUTH_TOKEN": "' + OAT + '\\q"}',
        "not JSON (cut short)": '{"CLAUDE_CODE_OAUTH_TOKEN": "' + OAT,
        "not UTF-8": b'{"CLAUDE_CODE_OAUTH_TOKEN": "' + OAT.encode() + b'\xff"}',
        "a list": json.dumps([OAT]),
        "a string": json.dumps(OAT),
        "a number value": json.dumps({"TRINITY_AGENT_SECRET": 12345}),
        "an object value": json.dumps({"CLAUDE_CODE_OAUTH_TOKEN": {"token": OAT}}),
        "a name that is none": json.dumps({OAT: "x"}),
        "an empty name": json.dumps({"": OAT}),
        "a NUL in a value": json.dumps({"CLAUDE_CODE_OAUTH_TOKEN": OAT + "\0"}),
        "too large": json.dumps({"CLAUDE_CODE_OAUTH_TOKEN": OAT * (MAX_BYTES // len(OAT) + 1)}),
    }
    if kind in contents:
        return write_private(path, contents[kind])
    if kind == "readable by others":
        return write_private(path, json.dumps({"CLAUDE_CODE_OAUTH_TOKEN": OAT}), mode=0o444)
    if kind == "a symbolic link":
        target = env_file(tmp_path, {"X": OAT})
        link = tmp_path / "link"
        link.symlink_to(target)
        return link
    if kind == "a directory":
        path.mkdir()
        return path
    if kind == "unreadable":
        return Path("/etc/passwd/trinity-agent-env")  # a path through a file: ENOTDIR
    assert kind == "missing"
    return path


BAD_FILES = [
    ("missing", "missing"),
    ("unreadable", r"unreadable \(Not a directory\)"),
    ("a directory", "not a regular file"),
    ("a symbolic link", "a symbolic link"),
    ("readable by others", "mode 0444; it must be uid"),
    ("too large", "larger than"),
    ("not UTF-8", r"not UTF-8 text \(at byte"),
    ("not JSON", r"not JSON \(invalid at line 1, column"),
    ("not JSON (cut short)", r"not JSON \(invalid at line 1, column"),
    ("a list", "not a JSON object of names to strings \\(a list\\)"),
    ("a string", "not a JSON object of names to strings \\(a string\\)"),
    ("a number value", "TRINITY_AGENT_SECRET: the value is a number, not a string"),
    ("an object value", "CLAUDE_CODE_OAUTH_TOKEN: the value is an object, not a string"),
    ("a name that is none", "entry 1: its name is not an environment variable name"),
    ("an empty name", "entry 1: its name is not an environment variable name"),
    ("a NUL in a value", "CLAUDE_CODE_OAUTH_TOKEN: the value holds a NUL character"),
]


@pytest.mark.parametrize(("kind", "message"), BAD_FILES, ids=[kind for kind, _ in BAD_FILES])
def test_a_bad_file_is_refused_naming_it_and_never_quoting_a_value(
    tmp_path: Path, kind: str, message: str
) -> None:
    path = _bad(tmp_path, kind)
    environ = {"TRINITY_AGENT_ENV_FILE": str(path), "TRINITY_AGENT_SECRET": "before"}

    with pytest.raises(EnvFileError, match=message) as raised:
        env_file_apply(environ)

    text = str(raised.value)
    assert text.startswith(f"{path}: "), text
    assert OAT not in text and OAT[:12] not in text and "zzzz" not in text, text
    assert environ == {"TRINITY_AGENT_ENV_FILE": str(path), "TRINITY_AGENT_SECRET": "before"}


def test_a_relative_path_is_refused() -> None:
    with pytest.raises(EnvFileError, match="TRINITY_AGENT_ENV_FILE='secrets/env' is not an abs"):
        env_file_apply({"TRINITY_AGENT_ENV_FILE": "secrets/env"})


def _cli_env(environ: dict[str, str], home: Path) -> dict[str, str]:
    """The environment one turn's CLI gets from a server whose baseline is `environ`."""
    runtime = RecordingRuntime()
    app = create_app(make_config(home, secret=SECRET), runtime=runtime, baseline=environ)
    runtime.forwarder = app.state.forwarder
    with TestClient(app) as client:
        response = client.post(
            "/api/task", json=task(), headers={"Authorization": f"Bearer {SECRET}"}
        )
    assert response.status_code == 200, response.text
    [given] = runtime.given
    return given


def test_the_cli_gets_no_more_of_a_files_values_than_of_the_process_environment(
    tmp_path: Path,
) -> None:
    values = {
        "TRINITY_AGENT_SECRET": SECRET,
        "TRINITY_AGENT_RUNTIME": "claude-code",
        "CLAUDE_CODE_OAUTH_TOKEN": OAT,
        "AGENT_GREETING": "hello",
    }
    from_file = {"PATH": "/usr/bin", "TRINITY_AGENT_ENV_FILE": str(env_file(tmp_path, values))}
    env_file_apply(from_file)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()

    by_file = _cli_env(from_file, tmp_path / "a")
    by_process = _cli_env({"PATH": "/usr/bin", **values}, tmp_path / "b")

    assert set(by_file) - {"TRINITY_AGENT_ENV_FILE"} == set(by_process)
    for name in ("PATH", "TRINITY_AGENT_RUNTIME", "AGENT_GREETING"):
        assert by_file[name] == by_process[name]
    for env in (by_file, by_process):
        assert "TRINITY_AGENT_SECRET" not in env
        assert SECRET not in env.values() and OAT not in env.values()
        # The token's place holds a forwarder capability, never the token.
        assert env["CLAUDE_CODE_OAUTH_TOKEN"] != OAT


def _server_env(tmp_path: Path, env_file_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRINITY_", "ANTHROPIC_"))}
    env.update(
        PYTHONPATH=str(REPO),
        TRINITY_AGENT_HOME=str(tmp_path),
        TRINITY_AGENT_SANDBOX="off",
        TRINITY_AGENT_ENV_FILE=str(env_file_path),
    )
    return env


def test_the_server_boots_on_the_files_secret_and_proves_it(tmp_path: Path) -> None:
    path = env_file(tmp_path, {"TRINITY_AGENT_SECRET": SECRET})
    server = subprocess.Popen(  # noqa: S603 - the project's own server
        [sys.executable, "-m", "agent_server", "--port", "0"],
        env=_server_env(tmp_path, path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        assert banner.startswith("agent server listening on http://"), banner
        nonce = new_nonce()
        health = httpx.get(banner.split()[-1] + "/health", params={"nonce": nonce}, timeout=10)
        assert proof_matches(secret=SECRET, nonce=nonce, proof=health.json()["proof"])
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_a_bad_file_stops_the_server_before_it_listens(tmp_path: Path) -> None:
    path = write_private(tmp_path / "env", '{"TRINITY_AGENT_SECRET": ["' + SECRET + '"]}')
    done = subprocess.run(  # noqa: S603 - the project's own server
        [sys.executable, "-m", "agent_server", "--port", "0"],
        env=_server_env(tmp_path, path),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"agent server: refusing to start: {path}: TRINITY_AGENT_SECRET: the value is a "
        "list, not a string"
    )
    assert "listening" not in done.stdout and SECRET not in done.stdout + done.stderr
