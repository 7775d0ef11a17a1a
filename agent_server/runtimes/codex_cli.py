"""The Codex CLI runtime: one `codex exec --json` process per turn.

The CLI always runs in API-key mode against the agent server's forwarder: its
config.toml (`runtimes/codex_home.py`) names one provider, the forwarder's `/v1`, and
`OPENAI_API_KEY` is the turn's capability. It never holds a plan token, an auth.json
or a refresh token (the platform alone refreshes a plan). Proxy variables point at
an unroutable loopback port (with loopback exempt), so any call the CLI would make
elsewhere fails at once instead of leaving the machine.

The message goes on stdin (`-`), for the reasons the Claude runtime gives (argv is
capped, visible in `ps`, and a leading `-` reads as a flag). A chat session resumes
its thread with `codex exec resume <thread id> -`.

`--json` prints one event a line: `thread.started` (the thread id), `item.completed`
(an `agent_message` is answer text; the last one is the turn's answer, as the CLI's
own `--output-last-message` takes it: earlier ones are commentary while it works),
`item.started` (a command starting), `turn.completed` (usage: the thread's running
total, so a resumed turn's own is the difference from the last one recorded) or
`turn.failed`, and `error` lines (retries too). A failure is classified from the
provider answer the forwarder kept first.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from agent_server.classifier import classify_codex_refusal
from agent_server.credentials import CODEX_FORWARDER_URL, OPENAI_API_KEY
from agent_server.errors import TurnError
from agent_server.isolation import AgentUser
from agent_server.runtimes.base import Clock, Turn, TurnOutcome, session_uuid
from agent_server.runtimes.codex_events import codex_line_events
from agent_server.runtimes.codex_home import (
    ThreadRecord,
    ThreadStore,
    codex_config,
    codex_home_prepare,
    rollout_exists,
)
from agent_server.runtimes.events import EVENT_LINE_BYTES, EventBounds, json_object
from agent_server.runtimes.process import CliProcesses, Finished, excerpt, killed_error
from agent_server.sandbox import Sandbox
from agent_server.upstream import UpstreamSeen

logger = logging.getLogger(__name__)

LABEL: Final = "the Codex CLI"
# The model a turn runs when neither the request nor TRINITY_AGENT_MODEL names one.
# Always sent: the CLI's own default (`gpt-6.1-sol` in 0.169.0) moves with its
# releases, and the answer must say which model served.
DEFAULT_MODEL: Final = "gpt-5.5-codex"
# Nothing listens on the discard port of loopback: a proxied call is refused at once.
UNROUTABLE_PROXY: Final = "http://127.0.0.1:9"
_PROXY_NAMES: Final = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
_NO_PROXY: Final = "127.0.0.1,localhost,::1"
# How many agent messages and error lines a run keeps (the answer is the last one).
KEEP: Final = 20


@dataclass
class CodexEvents:
    """What a `codex exec --json` run printed, as far as a turn needs it."""

    thread_id: str | None = None
    messages: list[str] = field(default_factory=list)
    usage: tuple[int, int] | None = None
    failure: str | None = None
    errors: list[str] = field(default_factory=list)


class CodexCliRuntime:
    name = "codex-cli"
    # Agent code (the CLI's tools) runs in the child: it gets a forwarder capability.
    uses_forwarder = True

    def __init__(
        self,
        *,
        binary: str,
        clock: Clock,
        threads_dir: Path,
        default_model: str | None = None,
        run_as: AgentUser | None = None,
        sandbox: Sandbox | None = None,
        contained: bool = False,
    ) -> None:
        self.binary = binary
        self.contained = contained
        self.clock = clock
        self.default_model = default_model or DEFAULT_MODEL
        self.run_as = run_as
        self.threads = ThreadStore(threads_dir)
        self._processes = CliProcesses(label=LABEL, run_as=run_as, sandbox=sandbox)

    def argv(self, model: str, thread: ThreadRecord | None) -> list[str]:
        """`codex exec --strict-config --json --skip-git-repo-check -m M [resume T] -`
        (prompt on stdin). Strict: a config key the CLI stopped reading (a switch that
        would phone out again after a pin bump) fails the turn instead of being
        ignored."""
        argv = [self.binary, "exec", "--strict-config", "--json", "--skip-git-repo-check"]
        argv += ["-m", model]
        if thread is not None:
            argv += ["resume", thread.thread_id]
        return [*argv, "-"]

    async def run(self, turn: Turn, env: Mapping[str, str]) -> TurnOutcome:
        if not env.get(OPENAI_API_KEY):
            raise TurnError(
                "auth",
                "no credential: neither CODEX_ACCESS_TOKEN nor OPENAI_API_KEY is set "
                "for this spawn",
            )
        model = turn.model or self.default_model
        codex_home = self._home(turn, env, model)
        key = str(session_uuid(turn.session_id)) if turn.session_id is not None else None
        thread = self.threads.load(key) if key is not None else None
        if thread is not None and not rollout_exists(codex_home, thread.thread_id):
            logger.warning("turn %s: thread history gone, a new thread", turn.execution_id)
            thread = None
        reader = _Lines(turn.events)
        finished = await self._processes.run_turn(
            self.argv(model, thread), turn, cli_env(env, codex_home), reader.line
        )
        events = reader.seen
        if key is not None and events.thread_id is not None:
            self._remember(key, events, thread)
        return interpret_codex_exit(
            finished, events, model=model, previous=thread, upstream=turn.upstream, now=self.clock()
        )

    @property
    def bounded(self) -> bool:
        """Whether a boundary of the server's holds everything the CLI runs (its
        sandbox, or its container), so the CLI's own command sandbox is off."""
        return self._processes.sandbox is not None or self.contained

    def _home(self, turn: Turn, env: Mapping[str, str], model: str) -> Path:
        config = codex_config(
            forwarder_v1=env.get(CODEX_FORWARDER_URL, ""),
            model=model,
            sandboxed=self.bounded,
        )
        try:
            return codex_home_prepare(turn.home, self.run_as, config)
        except OSError as exc:
            raise TurnError(
                "container_fault", f"cannot prepare the Codex CLI's home: {exc.strerror or exc}"
            ) from None

    def _remember(self, key: str, events: CodexEvents, previous: ThreadRecord | None) -> None:
        """Keep the session's thread; its totals only when the CLI reported them."""
        if events.usage is not None:
            record = ThreadRecord(events.thread_id or "", *events.usage)
        elif previous is not None and previous.thread_id == events.thread_id:
            record = previous
        else:
            record = ThreadRecord(events.thread_id or "")
        self.threads.save(key, record)

    async def aclose(self) -> None:
        self._processes.kill_all()


def cli_env(env: Mapping[str, str], codex_home: Path) -> dict[str, str]:
    """The CLI's environment: its home, and every proxy variable at a dead port."""
    cli = {k: v for k, v in env.items() if k != CODEX_FORWARDER_URL}
    cli["CODEX_HOME"] = str(codex_home)
    for name in _PROXY_NAMES:
        cli[name] = cli[name.lower()] = UNROUTABLE_PROXY
    cli["NO_PROXY"] = cli["no_proxy"] = _NO_PROXY
    return cli


class _Lines:
    """One spawn's stdout lines: what the result needs, and the events shown."""

    def __init__(self, events: EventBounds | None) -> None:
        self.events = events
        self.seen = CodexEvents()
        self._started: set[str] = set()

    def line(self, raw: bytes) -> None:
        parsed = json_object(raw)
        if parsed is None:
            return
        take_event(self.seen, parsed)
        if self.events is not None and not self.events.stopped:
            if len(raw) <= EVENT_LINE_BYTES:
                self.events.take(codex_line_events(parsed, self._started))


def parse_events(stdout: bytes) -> CodexEvents:
    """Read the JSON lines of `codex exec --json`; lines that are not events are skipped."""
    events = CodexEvents()
    for line in stdout.decode("utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            take_event(events, event)
    return events


def take_event(events: CodexEvents, event: dict[str, Any]) -> None:
    """Add what one parsed line says to `events` (the answer keeps only the last
    few messages and errors: a CLI printing without end holds no more memory)."""
    kind = event.get("type")
    if kind == "thread.started" and isinstance(event.get("thread_id"), str):
        events.thread_id = event["thread_id"]
    elif kind == "item.completed" and isinstance(item := event.get("item"), dict):
        # An `error` item is a notice (a model without metadata, a transport
        # fallback), not the turn failing: only `turn.failed` says that.
        if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
            events.messages[:] = [*events.messages[-(KEEP - 1) :], item["text"]]
    elif kind == "turn.completed":
        usage = _mapping(event.get("usage"))
        events.usage = (_int(usage.get("input_tokens")), _int(usage.get("output_tokens")))
    elif kind == "turn.failed":
        error = _mapping(event.get("error"))
        events.failure = str(error.get("message") or "the turn failed")
    elif kind == "error" and isinstance(event.get("message"), str):
        events.errors[:] = [*events.errors[-(KEEP - 1) :], event["message"]]


def interpret_codex_exit(
    finished: Finished,
    events: CodexEvents,
    *,
    model: str,
    previous: ThreadRecord | None,
    upstream: UpstreamSeen | None,
    now: datetime,
) -> TurnOutcome:
    """The answer of a finished Codex run, or the typed `TurnError`.

    A signal death is `runtime_killed` before anything is read; a `turn.failed` is
    classified (the provider's kept answer first); a run with neither a failure nor
    a `turn.completed` is a `container_fault`.
    """
    if finished.returncode < 0 and (killed := killed_error(LABEL, finished.returncode)):
        raise killed
    if events.failure is not None:
        raise _refusal(events.failure, upstream, now)
    if events.usage is None or finished.returncode != 0:
        if (killed := killed_error(LABEL, finished.returncode)) is not None:
            raise killed
        raise TurnError(
            "container_fault",
            f"{LABEL} exited with status {finished.returncode} without a finished turn: "
            f"{excerpt(finished.stderr) or excerpt(finished.stdout) or '(no output)'}",
        )
    total_in, total_out = events.usage
    if previous is not None and previous.thread_id == events.thread_id:
        # A resumed thread reports its running total; this turn's own is the rest.
        total_in = _rest(total_in, previous.input_tokens)
        total_out = _rest(total_out, previous.output_tokens)
    return TurnOutcome(
        response=events.messages[-1] if events.messages else "",
        model=model,
        input_tokens=total_in,
        output_tokens=total_out,
        # Priced by the control plane's billing catalog, like the direct API runtime.
        cost_usd=None,
    )


def _refusal(failure: str, upstream: UpstreamSeen | None, now: datetime) -> TurnError:
    refusal = upstream.refusal if upstream is not None else None
    if refusal is None and upstream is not None and upstream.requests == 0:
        # Nothing reached the provider: the CLI's own trouble, no word on the credential.
        return TurnError("container_fault", f"{LABEL} failed before any request: {failure}")
    verdict = classify_codex_refusal(refusal=refusal, text=failure, now=now)
    detail = f"{failure} ({verdict.upstream_said})" if verdict.upstream_said else failure
    return TurnError(verdict.error_code, detail, verdict.resets_at, verdict.limiting_window)


def _rest(total: int, before: int) -> int:
    return total - before if total >= before else total


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
