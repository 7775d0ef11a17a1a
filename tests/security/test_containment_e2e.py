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


def test_a_turns_tools_reach_no_host_service_and_leave_nothing_running(
    control: SimulatorControl, owner: User, redis_client: redis.Redis
) -> None:
    plan, _ = register_plan(control, "plan-a")
    agent_on(owner, plan, name="contained-a")
    Agent.objects.filter(name="contained-a").update(allowed_tools=["Bash"])
    token = secrets.token_hex(6)
    targets = listening_ports()
    database = connection.settings_dict["NAME"]
    redis_target = urlsplit(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    scan = port_scan(targets)
    redis_write = (
        f"timeout 5 redis-cli -h {redis_target.hostname} -p {redis_target.port or 6379} "
        f"-n {redis_target.path.lstrip('/') or 0} SET contained-{token} pwned 2>&1"
    )
    postgres_write = (
        f"timeout 5 psql -h 127.0.0.1 -U {connection.settings_dict['USER'] or 'root'} "
        f"-d {database} -c 'CREATE TABLE contained_{token} (x int)' 2>&1"
    )
    daemons = (
        "setsid sh -c 'while :; do date +%s%N >> marker-setsid; sleep 0.2; done' "
        "</dev/null >/dev/null 2>&1 & "
        "( ( nohup sh -c 'while :; do date +%s%N >> marker-daemon; sleep 0.2; done' "
        "</dev/null >/dev/null 2>&1 & ) & ); sleep 0.6; wc -l marker-setsid marker-daemon"
    )
    script = Scripted(control, f"contain-{token}")
    script.arm([scan, redis_write, postgres_write, daemons, "id -u"])

    body = post_task(owner, "contained-a", f"{script.trigger}: look around")

    assert body["http_status"] == 200, body.get("error_code")
    ended = time.monotonic()
    workdir = work_dir("contained-a")
    markers = [workdir / "marker-setsid", workdir / "marker-daemon"]
    sizes = [m.stat().st_size if m.exists() else 0 for m in markers]
    uid = agent_uid("contained-a")
    left = processes_of_uid(uid)
    breaches: list[str] = []

    scanned = script.output(scan)
    own = urlsplit(re.search(r"^own (\S+)$", scanned, re.MULTILINE).group(1))  # type: ignore[union-attr]
    opened = set(re.findall(r"^open (\S+)$", scanned, re.MULTILINE))
    assert len(re.findall(r"^(?:open|closed) ", scanned, re.MULTILINE)) == len(targets)
    strangers = opened - {f"{own.hostname}:{own.port}"}
    if strangers:
        breaches.append(f"host ports answered the agent: {sorted(strangers)}")
    if redis_client.get(f"contained-{token}") is not None:
        breaches.append("the agent wrote into Redis")
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
    if f"contained_{token}" in tables:
        breaches.append("the agent created a table in Postgres")
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE contained_{token}")
    if left:
        breaches.append(f"processes of the agent's user outlived the turn: {left}")
    while time.monotonic() - ended < AFTERLIFE_SECONDS:
        time.sleep(0.1)  # watching real daemons, not waiting for a clock
    grown = [m.name for m, size in zip(markers, sizes, strict=True) if m.stat().st_size > size]
    if grown:
        breaches.append(f"daemons kept writing after the turn ended: {grown}")
    redis_client.delete(f"contained-{token}")

    # Positive controls: the daemons ran during the turn, as the agent's own user.
    assert all(size > 0 for size in sizes), f"the daemons never ran: {script.output(daemons)}"
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


def test_a_turn_cannot_see_another_agents_files_tmp_or_spend_its_capability(
    control: SimulatorControl, owner: User
) -> None:
    plan_a, _ = register_plan(control, "plan-a")
    plan_b, _ = register_plan(control, "plan-b")
    agent_on(owner, plan_a, name="contained-a")
    agent_on(owner, plan_b, name="contained-b")
    Agent.objects.filter(name__startswith="contained-").update(allowed_tools=["Bash"])
    token = secrets.token_hex(6)
    canary = f"B-canary-{token}"
    release = f"release-{token}"
    # The second agent writes its canary into its work area and /tmp, then waits, its
    # turn (and capability) alive, until the test releases it.
    script_b = Scripted(control, f"contain-b-{token}")
    script_b.arm(
        [
            f"echo {canary} > b-note-{token}.txt; echo {canary} > /tmp/b-note-{token}.txt; "
            f"n=0; while [ ! -e {release} ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done; "
            "echo released"
        ]
    )
    result_b: dict[str, Any] = {}

    def turn_b() -> None:
        try:
            result_b.update(post_task(owner, "contained-b", f"{script_b.trigger}: keep a note"))
        finally:
            connection.close()

    thread = threading.Thread(target=turn_b, name="turn-b")
    thread.start()
    try:
        b_dir = work_dir("contained-b")
        wait_until(lambda: (b_dir / f"b-note-{token}.txt").exists(), seconds=90, what="B's note")
        b_cli = environ_of(cli_child(Agent.objects.get(name="contained-b")))
        capability = b_cli["CLAUDE_CODE_OAUTH_TOKEN"]
        b_socket = forwarder_socket("contained-b")
        a_dir = work_dir("contained-a")
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
        script_a = Scripted(control, f"contain-a-{token}")
        script_a.arm(probes)
        body_a = post_task(owner, "contained-a", f"{script_a.trigger}: look next door")
        outputs = {probe: script_a.output(probe) for probe in probes}
    finally:
        (work_dir("contained-b") / release).touch()
        thread.join(timeout=TURN_TIMEOUT)

    assert body_a["http_status"] == 200, body_a.get("error_code")
    assert result_b.get("http_status") == 200, result_b.get("error_code")
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
    if Path(f"/tmp/from-a-{token}").exists():  # noqa: S108 - the host's /tmp, looked at
        breaches.append("the agent wrote into the host's /tmp")
        Path(f"/tmp/from-a-{token}").unlink()  # noqa: S108
    with contextlib.suppress(OSError):
        Path(f"/tmp/b-note-{token}.txt").unlink()  # noqa: S108 - left by the old code
    # Positive controls: B wrote its note; A could write in its own places.
    assert (b_dir / f"b-note-{token}.txt").read_text().strip() == canary
    assert a_dir.is_dir()
    assert not breaches, "agent code was not contained:\n  " + "\n  ".join(breaches)
