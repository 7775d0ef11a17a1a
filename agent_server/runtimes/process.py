"""One CLI process per turn, bounded: the process handling both CLI runtimes share.

The CLI gets the message on stdin, leads its own process group (so a timeout kills
every tool it started, not just the CLI), dies with the server (the parent-death
signal), and runs as the agent user with no supplementary groups and a umask that
keeps its files to itself: in its sandbox (`agent_server/sandbox.py`: bwrap is what
is spawned, it joins the agent's cgroup first and drops to the user inside), else
switched to that user directly (separate-user mode). After every turn, on a timeout
and on cancellation, the whole group is SIGKILLed and the CLI reaped; in the sandbox
that also ends its PID namespace, and with it everything the turn started.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_server.errors import TurnError
from agent_server.isolation import AGENT_UMASK, AgentUser
from agent_server.runtimes.base import Turn
from agent_server.sandbox import Sandbox

logger = logging.getLogger(__name__)

EXCERPT_CHARS = 600
# The longest stdout line handed to a runtime (its result may be long); a longer
# one is skipped. Event parsing reads only lines up to events.EVENT_LINE_BYTES.
LINE_LIMIT = 16 * 1024 * 1024
# What is kept of the CLI's output once it was read (for a fault's excerpt).
OUTPUT_TAIL = 64 * 1024
STDERR_TAIL = 64 * 1024
READ_CHUNK = 64 * 1024
OnLine = Callable[[bytes], None]
# How long to wait for a process we have just SIGKILLed to be reaped.
_REAP_SECONDS = 5.0
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Finished:
    """A CLI process that ran to its end (or was killed): its status and the tails of
    its output (process.OUTPUT_TAIL, STDERR_TAIL); whole lines went to `on_line`."""

    returncode: int
    stdout: bytes
    stderr: bytes


class CliProcesses:
    """Runs CLI processes for one runtime and remembers the live ones for `kill_all`."""

    def __init__(
        self, *, label: str, run_as: AgentUser | None = None, sandbox: Sandbox | None = None
    ) -> None:
        # `label` names the CLI in errors: "the Claude Code CLI", "the Codex CLI".
        self.label = label
        # Separate-user mode: the CLI and every tool it starts run as this user.
        self.run_as = run_as
        # Sandbox mode: the CLI runs wrapped in it (as the sandbox's user).
        self.sandbox = sandbox
        self._live_groups: set[int] = set()

    async def run(
        self,
        argv: list[str],
        *,
        stdin: bytes,
        cwd: Path,
        home: Path,
        env: Mapping[str, str],
        timeout: float,
        execution_id: str,
        on_line: OnLine | None = None,
    ) -> Finished:
        """Run `argv` to its end within `timeout` seconds, in `cwd` with the spawn
        HOME `home` (in the sandbox, the two places it may write).

        Each line of its stdout goes to `on_line` as it is printed (without its
        newline; a line over LINE_LIMIT bytes is skipped); `Finished.stdout` keeps
        only the last OUTPUT_TAIL bytes, `Finished.stderr` the last STDERR_TAIL.

        Raises TurnError("container_fault") when it cannot start and
        TurnError("timeout") when it outlives `timeout` (its group is killed first).
        """
        if self.sandbox is not None:
            argv = self.sandbox.argv(argv, cwd=cwd, home=home)
        proc = await self._spawn(argv, cwd=cwd, env=env)
        self._live_groups.add(proc.pid)
        logger.info("turn %s: spawned %s pid=%s", execution_id, Path(argv[0]).name, proc.pid)
        try:
            try:
                async with asyncio.timeout(timeout):
                    stdout, stderr = await _communicate(proc, stdin, on_line)
            except TimeoutError:
                kill_group(proc.pid)
                await _reap(proc)
                raise TurnError(
                    "timeout",
                    f"the turn exceeded timeout_seconds={timeout:g}; its process group was killed",
                ) from None
        finally:
            # Tool processes the CLI left behind die with the turn; on cancellation
            # (a cancelled turn, a client gone, the server stopping) the CLI does too.
            kill_group(proc.pid)
            if proc.returncode is None:
                await _reap(proc)
            self._live_groups.discard(proc.pid)
        returncode = proc.returncode if proc.returncode is not None else -signal.SIGKILL
        return Finished(returncode=returncode, stdout=stdout, stderr=stderr)

    async def run_turn(
        self, argv: list[str], turn: Turn, env: Mapping[str, str], on_line: OnLine
    ) -> Finished:
        """`run` for a turn: its message on stdin, in its cwd and spawn HOME, within its
        time; the turn's event sink is closed once the CLI ended, however it ended."""
        try:
            return await self.run(
                argv,
                stdin=turn.message.encode("utf-8"),
                cwd=turn.cwd,
                home=turn.home,
                env=env,
                timeout=turn.timeout_seconds,
                execution_id=turn.execution_id,
                on_line=on_line,
            )
        finally:
            if turn.events is not None:
                turn.events.close()

    async def _spawn(
        self, argv: list[str], *, cwd: Path, env: Mapping[str, str]
    ) -> asyncio.subprocess.Process:
        identity: dict[str, Any] = {}
        hooks: list[Callable[[], None]] = []
        if self.sandbox is not None:
            # bwrap runs as root and drops to the user inside; its umask is set there.
            if self.sandbox.cgroup is not None:
                hooks.append(self.sandbox.cgroup.join)
        elif self.run_as is not None:
            identity = {
                "user": self.run_as.uid,
                "group": self.run_as.gid,
                "extra_groups": [],
                "umask": AGENT_UMASK,
            }
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(cwd),
                env=dict(env),
                start_new_session=True,
                # Runs after the switch to the agent user: a change of credentials
                # clears the parent-death signal, so it is set here, not before.
                preexec_fn=_preexec([*hooks, *_die_with_parent(os.getpid())]),
                **identity,
            )
        except OSError as exc:
            raise TurnError(
                "container_fault",
                f"cannot start {self.label} at {argv[0]}: {exc.strerror or exc}",
            ) from None

    def kill_all(self) -> None:
        for pgid in list(self._live_groups):
            kill_group(pgid)
        self._live_groups.clear()


def killed_error(label: str, returncode: int) -> TurnError | None:
    """`runtime_killed` for a signal death (or a wrapper's 128+N), else None.

    Decided before any output is parsed: a kill says nothing about the credential.
    `returncode` > 128 counts only when the caller found no result to read.
    """
    if returncode < 0:
        return TurnError("runtime_killed", f"{label} was killed by {signame(-returncode)}")
    if 128 < returncode <= 128 + 64 and is_signal(returncode - 128):
        return TurnError(
            "runtime_killed",
            f"{label} exited with status {returncode} ({signame(returncode - 128)}) and no result",
        )
    return None


def _preexec(hooks: list[Callable[[], None]]) -> Callable[[], None] | None:
    """One preexec function running `hooks` in order (None when there are none)."""
    if not hooks:
        return None

    def preexec() -> None:
        for hook in hooks:
            hook()

    return preexec


def _die_with_parent(parent_pid: int) -> list[Callable[[], None]]:
    """A preexec hook: the CLI gets SIGKILL if the agent server dies (Linux only).

    The CLI leads its own session, so killing the server's process group does not
    reach it; without this, a SIGKILLed server would leave turns running that no one
    will ever read, still spending quota.
    """
    if not sys.platform.startswith("linux"):
        return []

    def preexec() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the server died before the hook was set
            os.kill(os.getpid(), signal.SIGKILL)

    return [preexec]


async def _communicate(
    proc: asyncio.subprocess.Process, stdin: bytes, on_line: OnLine | None
) -> tuple[bytes, bytes]:
    """Feed stdin, read stdout by lines and stderr bounded, until both end and the
    process exits. Returns the tails of stdout and stderr."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    lines = LineReader(on_line)
    async with asyncio.TaskGroup() as group:
        group.create_task(_feed(proc.stdin, stdin))
        stderr = group.create_task(_tail(proc.stderr, STDERR_TAIL, None))
        stdout = await _tail(proc.stdout, OUTPUT_TAIL, lines.feed)
        lines.end()
        await stderr
        await proc.wait()
    return stdout, stderr.result()


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    # A CLI that exits without reading all of its prompt closes the pipe: not ours
    # to report, its exit says what happened.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.write(data)
        await pipe.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.close()


async def _tail(
    pipe: asyncio.StreamReader, keep: int, chunk_to: Callable[[bytes], None] | None
) -> bytes:
    """Read `pipe` to its end in chunks (never a whole line at once: asyncio's
    readline raises on a long one), handing each to `chunk_to`; returns the last
    `keep` bytes."""
    tail = bytearray()
    while chunk := await pipe.read(READ_CHUNK):
        if chunk_to is not None:
            chunk_to(chunk)
        tail += chunk
        if len(tail) > keep:
            del tail[: len(tail) - keep]
    return bytes(tail)


class LineReader:
    """Splits a byte stream into lines for `on_line`; a line over LINE_LIMIT bytes
    is dropped whole (its start is never delivered as a line), never buffered."""

    def __init__(self, on_line: OnLine | None) -> None:
        self.on_line = on_line
        self._buffer = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> None:
        if self.on_line is None:
            return
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._line(chunk[start:end])
            start = end + 1
        self._add(chunk[start:])

    def end(self) -> None:
        """The stream ended: its last line, if it had no newline."""
        if self._buffer and not self._skipping:
            self._deliver(bytes(self._buffer))
        self._buffer.clear()

    def _line(self, piece: bytes) -> None:
        self._add(piece)
        if not self._skipping:
            self._deliver(bytes(self._buffer))
        self._buffer.clear()
        self._skipping = False

    def _deliver(self, line: bytes) -> None:
        if self.on_line is None:
            return
        try:
            self.on_line(line)
        except Exception:
            # What a line shows is never worth the turn: the CLI's output goes on.
            logger.exception("a CLI output line could not be read; skipped")

    def _add(self, piece: bytes) -> None:
        if self._skipping:
            return
        if len(self._buffer) + len(piece) > LINE_LIMIT:
            self._skipping = True
            self._buffer.clear()
            return
        self._buffer += piece


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _reap(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), _REAP_SECONDS)


def excerpt(raw: bytes) -> str:
    """The tail of a CLI's output, at most EXCERPT_CHARS (redacted by the HTTP layer)."""
    text = raw.decode("utf-8", errors="replace").strip()
    if len(text) > EXCERPT_CHARS:
        text = "…" + text[-EXCERPT_CHARS:]
    return text


def is_signal(number: int) -> bool:
    try:
        signal.Signals(number)
    except ValueError:
        return False
    return True


def signame(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
