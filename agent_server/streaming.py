"""A turn answered as an NDJSON stream (`"stream": true`, see agent_server/contract.py).

The turn runs exactly as a plain one does and produces the same JSON answer; its
events go out as `{"type": "event", ...}` lines while it runs, and that answer as the
last line, `{"type": "result", "status", "body"}`. So a streamed answer can never
differ from the plain one.

A client that leaves mid-stream ends the turn: the stream's body is cancelled, it
cancels the turn's task, and the spawn's process group is killed as on a cancel (the
answer goes nowhere; the id is not remembered as cancelled, a retry may run it).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final

from fastapi.responses import JSONResponse, StreamingResponse

from agent_server.runtimes.events import Emit, Event

logger = logging.getLogger("agent_server")

NDJSON: Final = "application/x-ndjson"
_END: Final = None


def ndjson_line(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def streamed_turn(
    run: Callable[[Emit], Awaitable[JSONResponse]],
    *,
    execution_id: str,
    headers: Mapping[str, str],
    keep: set[asyncio.Task[Any]],
) -> StreamingResponse:
    """The NDJSON answer of the turn `run(emit)` runs. `keep` holds the turn's task
    while it runs (a task nobody references may be collected mid-turn)."""

    async def lines() -> AsyncIterator[bytes]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        async def produce() -> JSONResponse:
            try:
                return await run(queue.put_nowait)
            finally:
                queue.put_nowait(_END)

        # Started with the body, not before: a client gone before it reads starts nothing.
        task = asyncio.create_task(produce())
        keep.add(task)
        task.add_done_callback(keep.discard)
        try:
            while (event := await queue.get()) is not _END:
                yield ndjson_line({"type": "event", "event": event})
            answer = await task
            body = json.loads(bytes(answer.body))
            yield ndjson_line({"type": "result", "status": answer.status_code, "body": body})
        finally:
            if not task.done():
                # No await here: the body's cancel scope would cancel it again.
                logger.warning("turn %s: the client left the stream; ending the turn", execution_id)
                task.cancel()

    return StreamingResponse(lines(), media_type=NDJSON, headers=dict(headers))
