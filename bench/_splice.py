"""A plain TCP splice relay: the floor of any extra hop on loopback.

``python bench/_splice.py --target HOST:PORT`` listens on a free loopback port, prints
``splice listening on http://127.0.0.1:PORT`` once it does, and copies raw bytes both
ways between each accepted connection and a fresh connection to the target, until
either side closes; it reads nothing of HTTP. Asyncio protocols (no streams), the
default event loop, TCP_NODELAY on both sockets, backpressure by pausing the reading
side while the other side's buffer is full. Runs until SIGTERM. ``bench/gateway.py``
starts it as a process of its own so it costs the client's process nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket


def _nodelay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        # Without it the first small write after the headers waits for a delayed ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Half(asyncio.Protocol):
    """One side of a spliced pair: what it receives is written to its peer."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Half | None = None
        self.pending: list[bytes] = []  # bytes received before the peer connected
        self.eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        _nodelay(transport)

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self.pending.append(data)
        else:
            peer.transport.write(data)

    def eof_received(self) -> bool:
        peer = self.peer
        if peer is not None and peer.transport is not None and peer.transport.can_write_eof():
            peer.transport.write_eof()
        self.eof = True
        return True  # keep the other direction open until it closes too

    def connection_lost(self, exc: Exception | None) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.close()

    # Flow control: a full buffer towards us pauses reading on the other side.
    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class _Downstream(_Half):
    """The client's side: connects its upstream half as soon as it is accepted."""

    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__()
        self.target = target

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        upstream = _Half()
        try:
            await loop.create_connection(lambda: upstream, *self.target)
        except OSError:
            self.transport.close()
            return
        assert upstream.transport is not None
        upstream.peer, self.peer = self, upstream
        for data in self.pending:
            upstream.transport.write(data)
        self.pending.clear()
        if self.eof and upstream.transport.can_write_eof():
            upstream.transport.write_eof()
        if self.transport.is_closing():
            upstream.transport.close()


async def serve(target: tuple[str, int]) -> None:
    """Listen on a free loopback port, print it, relay until SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Downstream(target), "127.0.0.1", 0, family=socket.AF_INET, backlog=1024
    )
    port = server.sockets[0].getsockname()[1]
    print(f"splice listening on http://127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="HOST:PORT to relay to")
    host, _, port = parser.parse_args().target.rpartition(":")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve((host, int(port))))


if __name__ == "__main__":
    main()
