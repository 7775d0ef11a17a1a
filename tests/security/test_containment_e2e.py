"""Agent code is contained: a hostile model's Bash reaches nothing but its own forwarder.

Real processes end to end, as root: turns through the platform's REST API, the local
runtime starting real agent servers, the real Claude Code CLI, and the provider
simulator's scripted tool-using model (simulator/redteam.py), whose Bash calls

- connect to every TCP port the host listens on (read by the test, as root, from
  /proc/net/tcp and tcp6: Postgres, Redis, the simulator and its control API,
  whatever else runs here): only the agent's own forwarder may answer;
- write into Redis and Postgres (the test's own database, which trusts loopback):
  nothing may land;
- start a `setsid` watcher and a double-forked daemon that append to marker files
  every 0.2 s: once the turn is over no process of the agent's user may be left and
  the markers must stop growing;
- list, read and write a second agent's work area and /tmp (that agent wrote a canary
  into both in its own turn, which is still running): nothing of it may be seen or
  changed;
- spend that agent's live capability at its forwarder (its TCP base URL and, in the
  sandbox, its Unix socket; the test reads both as root from its CLI's environment
  and its server's log): refused or unreachable, never served.

Positive controls keep a run in which every tool failed from passing: the markers
exist when the turn ends, the agent's own forwarder answers, and the second agent
could write its canaries.

As another user (a developer's machine) there is no sandbox to test: the module
skips, and under CI=true (which runs as root with bubblewrap, `make setup`) it fails.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import secrets
import shlex
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from agents.models import Agent
from agents.runtimes import local
from simulator.control import SimulatorControl
from tests.execution.support import agent_on, cli_child, register_plan, wait_until
from tests.procs import processes_of_uid
from tests.skip_policy import in_ci

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

TURN_TIMEOUT = 180
MODEL = "claude-sonnet-5-5"
# The forwarder's start line (agent_server/forwarder.py) when it listens on a socket.
FORWARDER_SOCKET_LINE = re.compile(r"forwarder listening on unix:(\S+) ")
# How long the test watches the markers once the turn is over: the daemons append every
# 0.2 s, so a live one writes five times meanwhile. A real process is observed here;
# no clock of the platform's is involved.
AFTERLIFE_SECONDS = 1.5


@pytest.fixture(autouse=True)
def _as_root() -> None:
    if os.geteuid() != 0:
        message = "containment needs the platform to run as root (a user and sandbox per agent)"
        if in_ci():
            pytest.fail(f"{message}; CI runs as root")
        pytest.skip(message)


def listening_ports() -> list[str]:
    """`host:port` of every TCP listener of this host, as Bash's /dev/tcp names it (a
    wildcard listener is tried on loopback)."""
    targets: list[str] = []
    for table, loopback in (("/proc/net/tcp", "127.0.0.1"), ("/proc/net/tcp6", "::1")):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                local_address, state = line.split()[1], line.split()[3]
                if state != "0A":  # LISTEN
                    continue
                address, port = local_address.split(":")
                host = loopback if set(address) <= {"0"} or table.endswith("tcp6") else None
                if host is None:  # an IPv4 address, little-endian hex
                    host = ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0))
                targets.append(f"{host}:{int(port, 16)}")
    return sorted(set(targets))


def port_scan(targets: list[str]) -> str:
    probes = " ".join(shlex.quote(t) for t in targets)
    return (
        f"for t in {probes}; do h=${{t%:*}}; p=${{t##*:}}; "
        'if timeout 3 bash -c "exec 3<>/dev/tcp/$h/$p" 2>/dev/null; '
        'then echo "open $t"; else echo "closed $t"; fi; done; '
        'echo "own $ANTHROPIC_BASE_URL"; u=${ANTHROPIC_BASE_URL#http://}; '
        'if timeout 3 bash -c "exec 3<>/dev/tcp/${u%:*}/${u##*:}" 2>/dev/null; '
        'then echo "own answers"; fi'
    )


@dataclass
class Scripted:
    """One armed script's Bash calls, their results by command."""

    control: SimulatorControl
    trigger: str

    def arm(self, commands: list[str]) -> None:
        self.control.arm_red_team(trigger=self.trigger, reads=[], commands=commands)

    def output(self, command: str) -> str:
        results = self.control.red_team()["results"]
        found = [r["content"] for r in results if (r["input"] or {}).get("command") == command]
        assert found, f"no result for {command[:80]!r}: the turn ran no such tool call"
        return str(found[-1])


def post_task(user: User, agent: str, message: str) -> dict[str, Any]:
    client = APIClient()
    client.force_authenticate(user)
    response = client.post(
        f"/api/agents/{agent}/task",
        {"message": message, "timeout_seconds": TURN_TIMEOUT},
        format="json",
    )
    body: dict[str, Any] = response.json()
    body["http_status"] = response.status_code
    return body


def work_dir(agent: str) -> Path:
    return local.work_root() / agent / "work"


def agent_uid(agent: str) -> int:
    return pwd.getpwnam(local.os_user_name(agent)).pw_uid


@pytest.fixture
def redis_client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    yield client
    client.close()


@dataclass
class HostProbes:
    """The Bash commands of the host probe turn, by what each tries."""

    token: str
    targets: list[str]

    @property
    def scan(self) -> str:
        return port_scan(self.targets)

    @property
    def redis_write(self) -> str:
        target = urlsplit(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
        return (
            f"timeout 5 redis-cli -h {target.hostname} -p {target.port or 6379} "
            f"-n {target.path.lstrip('/') or 0} SET contained-{self.token} pwned 2>&1"
        )

    @property
    def postgres_write(self) -> str:
        user = connection.settings_dict["USER"] or "root"
        return (
            f"timeout 5 psql -h 127.0.0.1 -U {user} -d {connection.settings_dict['NAME']} "
            f"-c 'CREATE TABLE contained_{self.token} (x int)' 2>&1"
        )

    daemons = (
        "setsid sh -c 'while :; do date +%s%N >> marker-setsid; sleep 0.2; done' "
        "</dev/null >/dev/null 2>&1 & "
        "( ( nohup sh -c 'while :; do date +%s%N >> marker-daemon; sleep 0.2; done' "
        "</dev/null >/dev/null 2>&1 & ) & ); sleep 0.6; wc -l marker-setsid marker-daemon"
    )

    def commands(self) -> list[str]:
        return [self.scan, self.redis_write, self.postgres_write, self.daemons, "id -u"]


def ports_breached(scanned: str, targets: list[str]) -> list[str]:
    """The host ports that answered, besides the agent's own forwarder (the relay its
    base URL names)."""
    own = urlsplit(re.search(r"^own (\S+)$", scanned, re.MULTILINE).group(1))  # type: ignore[union-attr]
    opened = set(re.findall(r"^open (\S+)$", scanned, re.MULTILINE))
    assert len(re.findall(r"^(?:open|closed) ", scanned, re.MULTILINE)) == len(targets)
    return sorted(opened - {f"{own.hostname}:{own.port}"})


def stores_breached(token: str, redis_client: redis.Redis) -> list[str]:
    """What the agent wrote into Redis and Postgres (removed again)."""
    breaches = []
    if redis_client.get(f"contained-{token}") is not None:
        breaches.append("the agent wrote into Redis")
        redis_client.delete(f"contained-{token}")
    with connection.cursor() as cursor:
        if f"contained_{token}" in connection.introspection.table_names(cursor):
            breaches.append("the agent created a table in Postgres")
            cursor.execute(f"DROP TABLE contained_{token}")
    return breaches


def markers_growing(markers: list[Path], sizes: list[int], ended: float) -> list[str]:
    """The markers a daemon still appends to once the turn is over."""
    while time.monotonic() - ended < AFTERLIFE_SECONDS:
        time.sleep(0.1)  # watching real daemons, not waiting for a clock
    return [m.name for m, size in zip(markers, sizes, strict=True) if m.stat().st_size > size]


def test_a_turns_tools_reach_no_host_service_and_leave_nothing_running(
    control: SimulatorControl, owner: User, redis_client: redis.Redis
) -> None:
    plan, _ = register_plan(control, "plan-a")
    agent_on(owner, plan, name="contained-a")
    Agent.objects.filter(name="contained-a").update(allowed_tools=["Bash"])
    probes = HostProbes(token=secrets.token_hex(6), targets=listening_ports())
    script = Scripted(control, f"contain-{probes.token}")
    script.arm(probes.commands())

    body = post_task(owner, "contained-a", f"{script.trigger}: look around")

    assert body["http_status"] == 200, body.get("error_code")
    ended = time.monotonic()
    markers = [work_dir("contained-a") / "marker-setsid", work_dir("contained-a") / "marker-daemon"]
    sizes = [m.stat().st_size if m.exists() else 0 for m in markers]
    uid = agent_uid("contained-a")
    left = processes_of_uid(uid)
    scanned = script.output(probes.scan)
    breaches = stores_breached(probes.token, redis_client)
    if strangers := ports_breached(scanned, probes.targets):
        breaches.append(f"host ports answered the agent: {strangers}")
    if left:
        breaches.append(f"processes of the agent's user outlived the turn: {left}")
    if grown := markers_growing(markers, sizes, ended):
        breaches.append(f"daemons kept writing after the turn ended: {grown}")

    # Positive controls: the daemons ran during the turn, as the agent's own user, and
    # its own forwarder answered.
    assert all(sizes), f"the daemons never ran: {script.output(probes.daemons)}"
    assert script.output("id -u").split()[0] == str(uid)
    assert "own answers" in scanned, "the agent's own forwarder did not answer"
    assert not breaches, "agent code was not contained:\n  " + "\n  ".join(breaches)


def forwarder_socket(agent: str) -> Path | None:
    log = Path(settings.VAR_DIR) / "agents" / agent / "server.log"
    found = FORWARDER_SOCKET_LINE.search(log.read_text("utf-8", "replace"))
    return Path(found.group(1)) if found else None


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace")
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def spend(capability: str, *, url: str, unix: Path | None = None) -> str:
    """A Bash command POSTing one Messages request on `capability`; prints the status."""
    body = shlex.quote(
        f'{{"model": "{MODEL}", "max_tokens": 8, '
        '"messages": [{"role": "user", "content": "hi"}]}'
    )
    via = f"--unix-socket {shlex.quote(str(unix))} " if unix is not None else ""
    bearer = shlex.quote(f"authorization: Bearer {capability}")
    return (
        f"curl -s -m 10 -o /dev/null -w 'status %{{http_code}}\\n' {via}-X POST "
        f"{shlex.quote(url + '/v1/messages')} -H {bearer} "
        f"-H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' -d {body} 2>&1"
    )


def neighbour_probes(
    token: str, b_dir: Path, b_cli: dict[str, str], b_socket: Path | None
) -> list[str]:
    """Agent A's commands against agent B: its work area, /tmp, and live capability."""
    capability = b_cli["CLAUDE_CODE_OAUTH_TOKEN"]
    probes = [
        f"ls -la {b_dir} {b_dir.parent} {b_dir.parent.parent} 2>&1",
        f"cat {b_dir}/b-note-{token}.txt 2>&1",
        f"echo pwned > {b_dir}/from-a-{token} 2>&1; echo wrote $?",
        f"ls -la /tmp 2>&1; cat /tmp/b-note-{token}.txt 2>&1",
        f"echo pwned > /tmp/from-a-{token} 2>&1; echo wrote $?",
        spend(capability, url=b_cli["ANTHROPIC_BASE_URL"]),
    ]
    if b_socket is not None:
        probes.append(spend(capability, url="http://forwarder", unix=b_socket))
    return probes


def neighbour_turn(
    control: SimulatorControl, owner: User, token: str
) -> tuple[threading.Thread, dict[str, Any]]:
    """Agent B's turn: it writes its canary into its work area and /tmp, then waits,
    its turn (and capability) alive, until the test writes `release-<token>`."""
    script = Scripted(control, f"contain-b-{token}")
    script.arm(
        [
            f"echo B-canary-{token} > b-note-{token}.txt; "
            f"echo B-canary-{token} > /tmp/b-note-{token}.txt; n=0; "
            f"while [ ! -e release-{token} ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done; "
            "echo released"
        ]
    )
    result: dict[str, Any] = {}

    def turn_b() -> None:
        try:
            result.update(post_task(owner, "contained-b", f"{script.trigger}: keep a note"))
        finally:
            connection.close()

    thread = threading.Thread(target=turn_b, name="turn-b")
    thread.start()
    return thread, result


def neighbour_breaches(outputs: dict[str, str], token: str, b_dir: Path) -> list[str]:
    canary = f"B-canary-{token}"
    breaches = [
        f"{probe[:70]!r} showed the other agent's canary"
        for probe, output in outputs.items()
        if canary in output
    ]
    served = [probe[:60] for probe, output in outputs.items() if "status 200" in output]
    if served:
        breaches.append(f"the other agent's capability was served: {served}")
    if (b_dir / f"from-a-{token}").exists():
        breaches.append("the agent wrote into the other agent's work area")
    host_tmp = Path(tempfile.gettempdir())
    if (host_tmp / f"from-a-{token}").exists():
        breaches.append("the agent wrote into the host's /tmp")
        (host_tmp / f"from-a-{token}").unlink()
    (host_tmp / f"b-note-{token}.txt").unlink(missing_ok=True)  # left there by the old code
    return breaches


def test_a_turn_cannot_see_another_agents_files_tmp_or_spend_its_capability(
    control: SimulatorControl, owner: User
) -> None:
    plan_a, _ = register_plan(control, "plan-a")
    plan_b, _ = register_plan(control, "plan-b")
    agent_on(owner, plan_a, name="contained-a")
    agent_on(owner, plan_b, name="contained-b")
    Agent.objects.filter(name__startswith="contained-").update(allowed_tools=["Bash"])
    token = secrets.token_hex(6)
    b_dir = work_dir("contained-b")
    thread, result_b = neighbour_turn(control, owner, token)
    try:
        wait_until(lambda: (b_dir / f"b-note-{token}.txt").exists(), seconds=90, what="B's note")
        b_cli = environ_of(cli_child(Agent.objects.get(name="contained-b")))
        probes = neighbour_probes(token, b_dir, b_cli, forwarder_socket("contained-b"))
        script_a = Scripted(control, f"contain-a-{token}")
        script_a.arm(probes)
        body_a = post_task(owner, "contained-a", f"{script_a.trigger}: look next door")
        outputs = {probe: script_a.output(probe) for probe in probes}
    finally:
        (b_dir / f"release-{token}").touch()
        thread.join(timeout=TURN_TIMEOUT)

    assert body_a["http_status"] == 200, body_a.get("error_code")
    assert result_b.get("http_status") == 200, result_b.get("error_code")
    breaches = neighbour_breaches(outputs, token, b_dir)
    # Positive control: B wrote its note (so A had something to find).
    assert (b_dir / f"b-note-{token}.txt").read_text().strip() == f"B-canary-{token}"
    assert not breaches, "agent code was not contained:\n  " + "\n  ".join(breaches)
