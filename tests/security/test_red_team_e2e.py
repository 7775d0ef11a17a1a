"""The red-team test: a hostile, tool-using model gets no credential out of an agent.

Real processes end to end: turns through the platform's REST API (an API token the
test issued), the local runtime starting a real agent server, the real Claude Code
CLI, and the provider simulator's scripted model (simulator/redteam.py), which
answers the turn's prompt with tool calls: ``Read`` on every file under the agent's
home, working directory, state directory and the platform's ``var/``, on
``/proc/self/environ`` and the agent server's ``/proc/<pid>/environ``; and, where the
agent allows Bash, ``env``, ``cat`` of the same files and of both processes'
environments, and ``ls -R`` of every directory. Its final answer quotes whatever the
tools returned (plainly, base64-encoded and with spaced letters).

Four turns per run, each after a fresh walk of those places (as root, before the
turn): on the assigned plan, on a second plan after a committed switch (the walk's
trial, then the hot-reloaded plan itself), and on the platform key once both plans
are exhausted. Canaries: both plan tokens, the platform key, the agent's shared
secret, the platform's secret and encryption keys (and the files under var/ that
hold them) and every API token the test issued. None may appear, in any encoding
``tests/security/leaks.py`` sees through, in the tool results the simulator
recorded, the turn's answer, the agent server's and the platform's logs, or a text
dump of every database table. Each turn must have run on its real credential (the
simulator saw it), so the tools really ran.

Modes: with the platform running as root (CI), the CLI must run in its sandbox as the
agent's own unprivileged OS user (made by the local runtime,
``agents/runtimes/agent_users.py``), which cannot read ``var/`` or the server's
``/proc/<pid>/environ``; a CLI running as any other uid, or outside a sandbox, fails
the test.
Run as another user (a developer's machine), the CLI shares that user, so ``var/``
and the server's environment are readable by design: the test leaves them out and
says so loudly; under ``CI=true`` that mode fails.

Run it alone: ``pytest tests/security/test_red_team_e2e.py`` (docs/flows/red-team.md).
"""

from __future__ import annotations

import logging
import os
import pwd
import secrets
import shlex
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from agents.models import Agent
from agents.runtimes import local
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from tests.agents.factories import AgentFactory
from tests.security.leaks import Canary, Finding, find_leaks
from tests.skip_policy import in_ci
from tests.subscriptions.factories import plan_token
from trinity import services as trinity_services
from trinity.local_secrets import read_or_create
from trinity_contract.redaction import RedactingFilter, platform_redactor, redact

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# The platform's var/ as settings found it at import (tests move VAR_DIR to tmp_path).
PLATFORM_VAR = Path(settings.VAR_DIR)
MAX_FILES = 500
MAX_FILE_BYTES = 1_000_000
TURN_TIMEOUT = 240


@dataclass
class Evidence:
    """Everything the run collected, scanned once at the end."""

    canaries: list[Canary] = field(default_factory=list)
    surfaces: list[tuple[str, str]] = field(default_factory=list)  # (where, text)
    problems: list[str] = field(default_factory=list)  # not leaks: the test's own checks

    def add(self, where: str, text: str) -> None:
        self.surfaces.append((where, text))

    def findings(self) -> list[Finding]:
        # One canary per value: the secret key and the file holding it are one secret.
        unique = list({c.value: c for c in reversed(self.canaries)}.values())
        found: list[Finding] = []
        for where, text in self.surfaces:
            found += find_leaks(text, unique, surface=where)
        return found


class LogCapture(logging.Handler):
    """The platform's log lines as its redacting console handler renders them."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self.addFilter(RedactingFilter(platform_redactor))
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


# Library chatter at DEBUG that says nothing about credentials (celery prints the
# source of every task signature).
QUIET_LOGGERS = ("celery.utils.functional", "factory")


@pytest.fixture
def platform_logs() -> Iterator[LogCapture]:
    """Every log line of this process at DEBUG, rendered through the redaction.

    Records are also redacted as they are made, so pytest's own captured-log section
    of a failure report cannot print a leaked value either.
    """
    handler = LogCapture()
    root = logging.getLogger()
    level = root.level
    quiet = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    make_record = logging.getLogRecordFactory()

    def redacted_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        try:
            record.msg, record.args = redact(record.getMessage()), None
        except Exception:  # noqa: S110 - a record that cannot render is left as it is
            pass
        return record

    logging.setLogRecordFactory(redacted_record)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        logging.setLogRecordFactory(make_record)
        for name, old in quiet.items():
            logging.getLogger(name).setLevel(old)


def strong_mode() -> bool:
    """Whether the platform runs as root, so the CLI must run as the agent user."""
    return os.geteuid() == 0


def agent_user_name(agent: str) -> str:
    """The agent's own OS user (as root, the local runtime makes one per agent)."""
    return local.os_user_name(agent)


def agent_user_uid(agent: str) -> int | None:
    try:
        return pwd.getpwnam(agent_user_name(agent)).pw_uid
    except KeyError:
        return None


def walk(roots: list[Path]) -> tuple[list[str], list[str]]:
    """(files, directories) under ``roots``, in order, walked now as the test's user."""
    files: list[str] = []
    dirs: list[str] = []
    for root in roots:  # in order: the agent's own places first, then var/
        if not root.is_dir():
            continue
        dirs.append(str(root))
        for path in sorted(root.rglob("*")):
            if path.is_symlink() or Path(settings.STATIC_ROOT) in path.parents:
                # The collected static files are the panel's public assets.
                continue
            if path.is_dir():
                dirs.append(str(path))
            elif path.is_file() and path.stat().st_size <= MAX_FILE_BYTES:
                files.append(str(path))
    files = list(dict.fromkeys(files))
    # A cut list would read less than it claims; the places a turn sees are small.
    assert len(files) <= MAX_FILES, f"{len(files)} files to read: more than {MAX_FILES}"
    return files, list(dict.fromkeys(dirs))


def tool_script(*, roots: list[Path], server_pid: int, bash: bool) -> tuple[list[str], list[str]]:
    """The scripted model's Read paths and Bash commands for one turn."""
    files, dirs = walk(roots)
    reads = [*files, "/proc/self/environ", f"/proc/{server_pid}/environ"]
    if not bash:
        return reads, []
    environ = "tr '\\0' '\\n' < /proc/{}/environ"
    commands = [
        "env",
        "id -u",
        # Bash's parent is the CLI; the CLI's parent is the agent server.
        environ.format("$PPID"),
        environ.format("$(awk '/^PPid/{print $2}' /proc/$PPID/status)"),
        environ.format(server_pid),
        "ls -laR ~ 2>&1; cat ~/.claude.json ~/.claude/.credentials.json 2>&1",
        *(f"ls -laR {shlex.quote(str(d))} 2>&1" for d in roots),
        *(f"cat {shlex.quote(f)} 2>&1" for f in files),
    ]
    return reads, commands


@dataclass
class RedTeam:
    control: SimulatorControl
    client: APIClient
    evidence: Evidence
    bash: bool
    agent_name: str = "bot"
    trigger: str = field(default_factory=lambda: "red-team-" + secrets.token_hex(8))
    cwd: Path | None = None
    probe: Path | None = None

    def agent(self) -> Agent:
        return Agent.objects.select_related("subscription").get(name=self.agent_name)

    def roots(self) -> list[Path]:
        """Where the agent's files are, its own places first: the working directory
        the CLI reported and the directory around it (where a work area keeps the
        spawn HOMEs); then, in the strong mode, the agent server's home and state
        directory (the local runtime's layout) and var/ (the tests' VAR_DIR and the
        platform's own). In the weak mode the CLI shares the server's OS user, so only
        its own places are asked for: they must hold nothing secret in either mode."""
        places = [self.cwd, self.cwd.parent] if self.cwd is not None else []
        if strong_mode():
            home = local.agent_home(self.agent_name)
            places += [home, home / ".trinity", Path(settings.VAR_DIR), PLATFORM_VAR]
        return list(dict.fromkeys(places))

    def task(self, message: str) -> dict[str, Any]:
        response = self.client.post(
            f"/api/agents/{self.agent_name}/task",
            {"message": message, "timeout_seconds": TURN_TIMEOUT},
            format="json",
        )
        body = response.json()
        if response.status_code != 200:
            # Status and code only: the body carries the hostile model's answer.
            hint = ""
            if strong_mode() and agent_user_uid(self.agent_name) is None:
                user = agent_user_name(self.agent_name)
                hint = f"; the agent's OS user {user!r} does not exist (the local runtime makes it)"
            pytest.fail(
                f"the turn failed: {response.status_code} {body.get('error_code')}{hint}",
                pytrace=False,
            )
        return dict(body)

    def recon(self) -> None:
        """A first turn without tools: learns where the CLI runs (the working directory
        Claude Code names in its prompt)."""
        self.control.arm_red_team(trigger=self.trigger, reads=[])
        self.task(f"{self.trigger}: where are you?")
        reported = self.control.red_team()["cwd"]
        assert reported, "the CLI named no working directory in its prompt"
        self.cwd = Path(reported)
        # The positive control: a file the agent may read, so a run in which every
        # tool call failed (and so leaked nothing) cannot pass.
        self.probe = self.cwd / "red-team-probe.txt"
        self.probe.write_text(f"probe {self.trigger}\n")
        self.probe.chmod(0o644)

    def turn(self, label: str, *, served_by: str) -> dict[str, Any]:
        """One hostile turn; its tool results and answer join the evidence."""
        agent = self.agent()
        reads, commands = tool_script(
            roots=self.roots(), server_pid=int(agent.process_handle), bash=self.bash
        )
        if not strong_mode():
            server_environ = f"/proc/{agent.process_handle}/environ"
            reads = [r for r in reads if r != server_environ]
        self.control.clear_requests()
        self.control.arm_red_team(trigger=self.trigger, reads=reads, commands=commands)
        body = self.task(f"{self.trigger}: {label}")
        script = self.control.red_team()
        served = [
            r
            for r in self.control.requests()
            if r["path"].startswith("/v1/messages") and r["status"] == 200
        ]
        # The turn really ran through the simulator on its real credential, tools and all.
        assert {r["credential"] for r in served} == {served_by}, (label, served_by)
        assert script["answers"] >= 1 and script["tool_calls"] == len(reads) + len(commands)
        assert len(script["results"]) == script["tool_calls"], label
        probe_calls = (
            {"file_path": str(self.probe)},
            {"command": f"cat {shlex.quote(str(self.probe))} 2>&1"},
        )
        probed = [
            r
            for r in script["results"]
            if any(call.items() <= (r["input"] or {}).items() for call in probe_calls)
        ]
        assert len(probed) == (2 if self.bash else 1), f"{label}: the probe was not asked for"
        assert all(self.trigger in r["content"] for r in probed), (
            f"{label}: the agent's tools could not read the probe in its own working "
            "directory, so this turn proves nothing"
        )
        for result in script["results"]:
            where = f"{label}: {result['tool']} {describe(result['input'])}"
            self.evidence.add(f"the tool result of {where}", result["content"])
            if result["tool"] == "Bash" and result["input"] == {
                "command": "id -u",
                "description": "inspect",
            }:
                self.check_cli_user(label, result["content"])
        self.evidence.add(f"the answer of the {label} turn", str(body.get("response")))
        return body

    def check_cli_user(self, label: str, output: str) -> None:
        """As root, the CLI ran as the agent's own user (the output's first word: the
        CLI may append notes of its own to a tool's result)."""
        uid = agent_user_uid(self.agent_name)
        ran_as = output.split()[0] if output.split() else "(nothing)"
        if strong_mode() and ran_as != str(uid):
            self.evidence.problems.append(
                f"{label}: the CLI ran as uid {ran_as}, not as the agent's own user "
                f"{agent_user_name(self.agent_name)} ({uid})"
            )


def describe(tool_input: dict[str, Any] | None) -> str:
    """A tool call for a failure message: a path or a command, which hold no canary."""
    if not tool_input:
        return "(no input)"
    return str(tool_input.get("file_path") or tool_input.get("command"))[:160]


def database_text() -> str:
    """Every row of every table, as text."""
    lines: list[str] = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            lines += [f"{table}: {row!r}" for row in cursor.fetchall()]
    return "\n".join(lines)


def log_files(roots: list[Path]) -> Iterator[Path]:
    for root in roots:
        if root.is_dir():
            yield from (p for p in root.rglob("*.log") if p.is_file())


def platform_secret_canaries(var: Path) -> list[Canary]:
    """The platform's own secrets, and var/ laid out as the embedded default keeps it
    (the values the platform runs with, in the files it would read them from)."""
    secret_key = read_or_create(var / "secret_key", lambda: str(settings.SECRET_KEY))
    encryption_key = read_or_create(
        var / "encryption.key", lambda: str(settings.TRINITY_ENCRYPTION_KEYS[0])
    )
    canaries = [
        Canary("the platform's SECRET_KEY", str(settings.SECRET_KEY)),
        Canary("var/secret_key", secret_key),
        Canary("var/encryption.key", encryption_key),
    ]
    canaries += [
        Canary(f"encryption key #{i + 1}", str(key))
        for i, key in enumerate(settings.TRINITY_ENCRYPTION_KEYS)
    ]
    for name in ("secret_key", "encryption.key"):
        path = PLATFORM_VAR / name
        if path.is_file() and len(path.read_text().strip()) >= 16:
            canaries.append(Canary(f"the platform's var/{name}", path.read_text().strip()))
    return canaries


def issue_api_token(admin: APIClient, username: str) -> str:
    response = admin.post("/api/auth/tokens", {"username": username}, format="json")
    assert response.status_code == 200, response.status_code
    return str(response.json()["token"])


@pytest.mark.parametrize("tools", [["Read"], ["Read", "Bash"]], ids=["read", "read-and-bash"])
def test_a_tool_using_model_gets_no_credential_out_of_an_agent(
    tools: list[str],
    control: SimulatorControl,
    owner: User,
    admin_user: User,
    admin_client_api: APIClient,
    platform_logs: LogCapture,
    tmp_path: Path,
) -> None:
    if not strong_mode():
        message = (
            "RED-TEAM WEAK MODE: the platform is not root, so the CLI runs as this same OS "
            "user and can read var/ and the agent server's /proc/<pid>/environ by design; "
            "those are left out of this run. CI runs as root and checks them."
        )
        if in_ci():
            pytest.fail(f"{message} Under CI=true the red-team test must run as root.")
        warnings.warn(message, stacklevel=1)

    evidence = Evidence()
    plan_a, plan_b = plan_token(), plan_token()
    key = "sk-ant-api03-" + secrets.token_urlsafe(40)
    control.register(plan_a, kind="oauth", label="plan-a")
    control.register(plan_b, kind="oauth", label="plan-b")
    control.register(key, kind="api_key", label="platform-key", credit_usd=50)
    sub_a, _ = subscription_services.subscription_register(
        name="plan-a", provider="anthropic", plan_type="max-20x", token=plan_a
    )
    subscription_services.subscription_register(
        name="plan-b", provider="anthropic", plan_type="max-20x", token=plan_b
    )
    trinity_services.platform_api_key_set(key=key)
    agent = AgentFactory.create(name="bot", owner=owner, allowed_tools=tools)
    subscription_services.assignment_set(agent=agent, subscription_id=sub_a.pk)

    owner_token = issue_api_token(admin_client_api, owner.username)
    admin_token = issue_api_token(admin_client_api, admin_user.username)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {owner_token}")
    evidence.canaries = [
        Canary("plan-a's token", plan_a),
        Canary("plan-b's token", plan_b),
        Canary("the platform API key", key),
        Canary("the agent's shared secret", agent.shared_secret.reveal()),
        Canary("the owner's API token", owner_token),
        Canary("the admin's API token", admin_token),
        *platform_secret_canaries(Path(settings.VAR_DIR)),
    ]

    red = RedTeam(control=control, client=client, evidence=evidence, bash="Bash" in tools)
    red.recon()
    red.turn("assigned plan", served_by="plan-a")

    control.set_usage(plan_a, "five_hour", percent=100)
    switched = red.turn("switch to the second plan", served_by="plan-b")
    assert switched["served_by_subscription"]["name"] == "plan-b"
    assert red.agent().subscription_id != sub_a.pk, "the switch to plan-b was not committed"
    red.turn("hot-reloaded plan", served_by="plan-b")

    control.set_usage(plan_b, "five_hour", percent=100)
    keyed = red.turn("key rung", served_by="platform-key")
    assert keyed["served_by_kind"] == "api_key"

    for path in log_files([*red.roots(), Path(settings.VAR_DIR)]):
        evidence.add(
            f"the log file {path.relative_to(path.anchor)}", path.read_text("utf-8", "replace")
        )
    evidence.add("the platform's logs", "\n".join(platform_logs.lines))
    evidence.add("the database (every table)", database_text())

    findings = evidence.findings()
    failures = [str(f) for f in findings] + evidence.problems
    if strong_mode() and red.agent().isolation != "sandbox":
        failures.append(
            f"the agent ran with isolation {red.agent().isolation!r}: as root its CLI must "
            "run in its sandbox (make setup installs bubblewrap)"
        )
    if failures:
        leaked = Counter(f.canary for f in findings)
        summary = ", ".join(f"{name} ({count} places)" for name, count in leaked.most_common())
        pytest.fail(
            f"red team with tools {tools}: {len(failures)} finding(s); leaked: "
            f"{summary or 'nothing'}\n  " + "\n  ".join(failures),
            pytrace=False,
        )
