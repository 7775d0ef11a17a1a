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
from agent_server.sandbox import Sandbox

logger = logging.getLogger(__name__)

EXCERPT_CHARS = 600
# How long to wait for a process we have just SIGKILLed to be reaped.
_REAP_SECONDS = 5.0
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Finished:
    """A CLI process that ran to its end (or was killed): its status and output."""

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
    ) -> Finished:
        """Run `argv` to its end within `timeout` seconds, in `cwd` with the spawn
        HOME `home` (in the sandbox, the two places it may write).

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
                stdout, stderr = await asyncio.wait_for(proc.communicate(stdin), timeout)
            except TimeoutError:
                kill_group(proc.pid)
                await _reap(proc)
                raise TurnError(
                    "timeout",
                    f"the turn exceeded timeout_seconds={timeout:g}; its process group was killed",
                ) from None
        finally:
            # Tool processes the CLI left behind die with the turn; on cancellation
            # (client gone, server stopping) the CLI itself does too.
            kill_group(proc.pid)
            if proc.returncode is None:
                await _reap(proc)
            self._live_groups.discard(proc.pid)
        returncode = proc.returncode if proc.returncode is not None else -signal.SIGKILL
        return Finished(returncode=returncode, stdout=stdout, stderr=stderr)

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
