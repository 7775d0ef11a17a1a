"""No process can pose as an agent server: the squatter, end to end.

A process of the attacker's holds the endpoint the platform will use for an agent
(the Unix socket the local runtime would bind, or the TCP endpoint a docker agent
was recorded on) and plays an agent server that is out of quota: ``/health`` 200,
every turn 429 ``rate_limit``. Before the proof, the platform sent it the agent's
bearer secret and the prompt, then walked every plan's token and the platform key
into it as overrides. A turn is run through the REST API with two plans and the
platform key available: the squatter must receive nothing but ``/health?nonce=``,
and the turn fails ``container_fault`` with an error naming the endpoint.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent, ProcessState
from agents.runtimes import local
from simulator.control import SimulatorControl
from tests.execution.support import agent_on, register_plan, task
from trinity import services as trinity_services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# The attacker's program: an HTTP server on a Unix socket (argv[1] a path) or on a
# loopback port (argv[1] "tcp"), recording every request it receives as one JSON line
# in argv[2].
SQUATTER = r"""
import json, socket, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import ThreadingUnixStreamServer

where, record = sys.argv[1], sys.argv[2]

class Handler(BaseHTTPRequestHandler):
    def address_string(self):
        return "squatter"

    def _record(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        with open(record, "a") as out:
            out.write(json.dumps({
                "method": self.command, "path": self.path,
                "headers": dict(self.headers.items()), "body": body,
            }) + "\n")
        return body

    def _answer(self, status, payload, echo=None):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if echo:  # plays a current agent server, so the walk sends every override
            self.send_header("X-Trinity-Auth-Override", echo)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._record()
        self._answer(200, {"status": "ok", "runtime": "claude-code", "model": None,
                           "busy": 0, "proof": "0" * 64})

    def do_POST(self):
        body = self._record()
        if self.path == "/api/credentials/reload-token":
            self._answer(200, {"status": "ok", "reloaded": True, "env_shadow": []})
            return
        try:
            request = json.loads(body)
        except ValueError:
            request = {}
        override = request.get("auth_override") or {}
        echo = "oauth_token" if override.get("oauth_token") else (
            "api_key" if override.get("api_key") else None)
        self._answer(429, {"error_code": "rate_limit", "detail": "You've hit your limit",
                           "execution_id": request.get("execution_id"), "resets_at": None},
                     echo)

    def log_message(self, *args):
        pass

if where == "tcp":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
else:
    class UnixServer(ThreadingUnixStreamServer):
        def get_request(self):
            request, _ = super().get_request()
            return request, ("squatter", 0)
    server = UnixServer(where, Handler)
    print(f"unix://{where}", flush=True)
server.serve_forever()
"""


class Squatter:
    """The attacker's process, and what it was sent."""

    def __init__(self, where: str, workdir: Path) -> None:
        self.record = workdir / "squatter-requests.jsonl"
        self.record.touch()
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter
            [sys.executable, "-c", SQUATTER, where, str(self.record)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.endpoint = self.process.stdout.readline().strip()
        assert self.endpoint, "the squatter did not start"

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def raw(self) -> str:
        return self.record.read_text()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture
def squat(tmp_path: Path) -> Iterator[Callable[[str], Squatter]]:
    started: list[Squatter] = []

    def start(where: str) -> Squatter:
        squatter = Squatter(where, tmp_path)
        started.append(squatter)
        return squatter

    yield start
    for squatter in started:
        squatter.stop()


@pytest.fixture
def short_var_dir(control: SimulatorControl, settings: Any) -> Iterator[Path]:
    """VAR_DIR short enough for socket paths, whatever the test's name."""
    directory = Path(tempfile.mkdtemp(prefix="sq-"))
    settings.VAR_DIR = directory
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def walk_credentials(control: SimulatorControl, owner: User) -> dict[str, str]:
    """Two plans and the platform key, all available: a squatter answering 429 to
    each attempt is walked through every one of them (before the proof)."""
    a, a_token = register_plan(control, "plan-a")
    _, b_token = register_plan(control, "plan-b")
    key = "sk-ant-api03-" + uuid.uuid4().hex * 2
    control.register(key, kind="api_key", label="platform-key", credit_usd=100)
    trinity_services.platform_api_key_set(key=key)
    agent = agent_on(owner, a)
    return {
        "agent secret": agent.shared_secret.reveal(),
        "plan-a token": a_token,
        "plan-b token": b_token,
        "platform key": key,
    }


PROMPT = "squatter-canary-prompt-" + uuid.uuid4().hex


def _assert_it_got_nothing(squatter: Squatter, secrets: dict[str, str]) -> None:
    requests = squatter.requests()
    raw = squatter.raw()
    # Named, never printed: a failure here must not put the secrets in the test log.
    received = [what for what, value in {**secrets, "prompt": PROMPT}.items() if value in raw]
    received += ["an Authorization header"] * any("Authorization" in r["headers"] for r in requests)
    assert received == [], f"the squatter received: {received}"
    for request in requests:
        assert request["method"] == "GET", request
        assert re.fullmatch(r"/health\?nonce=[0-9a-f]{64}", request["path"]), request["path"]


def _assert_failed_naming(body: dict[str, Any], endpoint: str) -> None:
    assert body["status"] == "failed", body
    assert body["error_code"] == "container_fault", body
    assert endpoint in body["error_detail"], body["error_detail"]
    assert "did not prove it holds the agent's secret" in body["error_detail"]


def test_a_squatter_on_the_agents_socket_before_it_starts_gets_nothing_and_the_turn_fails(
    short_var_dir: Path,
    squat: Callable[[str], Squatter],
    walk_credentials: dict[str, str],
    owner_client: APIClient,
) -> None:
    path = local.socket_path("bot")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    squatter = squat(str(path))

    body = task(owner_client, message=PROMPT)

    _assert_it_got_nothing(squatter, walk_credentials)
    assert squatter.requests(), "the platform never asked the squatter for a proof"
    _assert_failed_naming(body, f"unix://{path}")
    agent = Agent.objects.get(name="bot")
    assert agent.process_state == ProcessState.FAILED
    assert f"unix://{path}" in agent.process_detail
    assert agent.endpoint == ""


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_a_squatter_on_a_recorded_endpoint_gets_nothing_from_a_process_that_never_verified_it(
    short_var_dir: Path,
    squat: Callable[[str], Squatter],
    walk_credentials: dict[str, str],
    owner_client: APIClient,
    transport: str,
) -> None:
    # The agent is recorded as running (a web or worker that restarted finds it so),
    # but what answers on its endpoint is the squatter: the real server died and the
    # attacker bound the endpoint, or was there instead of it all along.
    if transport == "unix":
        path = local.socket_path("bot")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        squatter = squat(str(path))
    else:
        squatter = squat("tcp")
    Agent.objects.filter(name="bot").update(
        endpoint=squatter.endpoint,
        process_handle=str(squatter.process.pid),
        process_state=ProcessState.RUNNING,
    )

    body = task(owner_client, message=PROMPT)

    _assert_it_got_nothing(squatter, walk_credentials)
    assert len(squatter.requests()) == 1  # one proof asked, nothing else sent
    _assert_failed_naming(body, squatter.endpoint)


def test_the_real_agent_server_proves_itself_and_serves_over_its_socket(
    short_var_dir: Path,
    control: SimulatorControl,
    walk_credentials: dict[str, str],
    owner_client: APIClient,
) -> None:
    # The counterpart of the squatter: with nothing on the socket, the agent starts,
    # proves itself, and its turn is served (so the tests above fail for the squatter,
    # not for every endpoint).
    body = task(owner_client, message="say hi")
    assert body["status"] == "succeeded", body
    agent = Agent.objects.get(name="bot")
    assert agent.endpoint == f"unix://{local.socket_path('bot')}"
    argv = Path(f"/proc/{agent.process_handle}/cmdline").read_bytes().split(b"\0")
    assert b"--port" not in argv and b"--host" not in argv
    assert f"--uds\0{local.socket_path('bot')}".encode() in b"\0".join(argv)
    assert os.stat(local.socket_dir()).st_mode & 0o777 == 0o700
