"""Cancelling a turn by its execution id: `POST /api/turns/{execution_id}/cancel`.

Every turn's spawn runs as an asyncio task of its own, tracked here by execution id.
Cancelling it cancels that task: the cancellation reaches `CliProcesses.run`, whose
cleanup SIGKILLs the spawn's whole process group (the CLI and everything its tools
started; in the sandbox that ends its PID namespace, in separate-user mode the
server's reap then kills whatever of the agent's user is left) and reaps the CLI.
The turn then answers `cancelled` (409).

The id is remembered, bounded (the last KEEP ids, for TTL seconds): a turn request
that arrives after its cancel (the platform's cancel can overtake a slow dispatch)
answers `cancelled` without spawning anything. In this process's memory only: a
restarted server has no turn to cancel anyway.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from agent_server.errors import TurnError
from agent_server.metering import Metered

T = TypeVar("T")

KEEP: Final = 1024
TTL_SECONDS: Final = 15 * 60.0
# How long the cancel request waits for the turn's cleanup (its group killed and
# the CLI reaped) before it answers.
CLEANUP_SECONDS: Final = 2.0


class Cancellations:
    """The running turns by execution id, and the ids cancelled lately."""

    def __init__(
        self,
        *,
        keep: int = KEEP,
        ttl: float = TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keep = keep
        self._ttl = ttl
        self._clock = clock
        self._cancelled: OrderedDict[str, float] = OrderedDict()
        self._running: dict[str, set[asyncio.Task[Any]]] = {}
        self._spent: dict[str, Metered] = {}

    def is_cancelled(self, execution_id: str) -> bool:
        """Whether `execution_id` was cancelled within the last TTL seconds."""
        self._forget_old()
        return execution_id in self._cancelled

    async def cancel(self, execution_id: str) -> bool:
        """Remember the id and end its running turns; True when one was running.
        Returns once their cleanup is done (or after CLEANUP_SECONDS)."""
        self._cancelled[execution_id] = self._clock()
        self._cancelled.move_to_end(execution_id)
        self._forget_old()
        while len(self._cancelled) > self._keep:
            self._cancelled.popitem(last=False)
        tasks = [task for task in self._running.get(execution_id, ()) if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=CLEANUP_SECONDS)
        return bool(tasks)

    def spent(self, execution_id: str, metered: Metered) -> None:
        """What a turn being cancelled had spent, for its `cancelled` answer."""
        self._spent[execution_id] = metered

    async def run(self, execution_id: str, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` as the cancellable task of `execution_id`.

        Raises TurnError("cancelled") when `cancel` ended it; a cancellation of the
        caller itself (a client gone, the server stopping) propagates as it is, and
        ends `work` too."""
        task = asyncio.ensure_future(work)
        self._running.setdefault(execution_id, set()).add(task)
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            error = TurnError(
                "cancelled",
                f"the turn {execution_id} was cancelled; its process group was killed",
            )
            error.metered = self._spent.pop(execution_id, None)
            raise error from None
        finally:
            running = self._running.get(execution_id, set())
            running.discard(task)
            if not running:
                self._running.pop(execution_id, None)
                self._spent.pop(execution_id, None)

    def _forget_old(self) -> None:
        horizon = self._clock() - self._ttl
        while self._cancelled and next(iter(self._cancelled.values())) < horizon:
            self._cancelled.popitem(last=False)
