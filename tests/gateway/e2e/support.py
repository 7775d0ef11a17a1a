"""What the gateway's end-to-end tests share: the recording tap, the gateway's handle,
and a person's key."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from django.contrib.auth.models import User

from gateway.keys import gateway_key_create
from trinity import clock

METRICS_TOKEN = "gateway-tests-metrics-" + secrets.token_hex(8)
# Small, so a test can pass it without sending megabytes.
MAX_BODY = 256 * 1024
T = TypeVar("T")


@dataclass
class Tap:
    """A TCP relay to the simulator that keeps every byte sent upstream."""

    target: tuple[str, int]
    upstream: bytearray = field(default_factory=bytearray)
    port: int = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, keep: bool) -> None:
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while chunk := await src.read(65536):
                    if keep:
                        self.upstream.extend(chunk)
                    dst.write(chunk)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))

    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()

        threading.Thread(target=run, daemon=True, name="gateway-tap").start()
        ready.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Gateway:
    url: str
    log_path: Path
    tap: Tap

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def issue(owner: User, name: str = "laptop", **values: Any) -> str:
    """A gateway key of ``owner`` (the key itself, as the person would paste it)."""
    return gateway_key_create(
        owner=owner, created_by=owner, name=name, now=clock.now(), **values
    ).key


def expiring(seconds: float) -> datetime:
    return clock.now() + timedelta(seconds=seconds)


def wait_for(read: Callable[[], T | None], *, seconds: float = 10.0) -> T:
    """What ``read`` returns once it is not None: the gateway writes usage and notices
    after the answer, in batches (every quarter second)."""
    deadline = time.monotonic() + seconds
    while True:
        found = read()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError("the gateway did not write it in time")
        time.sleep(0.1)  # polling what another process writes
