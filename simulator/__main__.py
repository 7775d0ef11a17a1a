"""``python -m simulator --host 127.0.0.1 --port 0``.

Binds and listens before printing ``simulator listening on http://HOST:PORT``, so a
parent that reads the line can connect at once: early connections wait in the
listen backlog until the server accepts them.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from pathlib import Path

import uvicorn

from simulator.app import create_app
from simulator.seed import load_seed
from simulator.state import Simulator


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m simulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    parser.add_argument("--seed", type=Path, help="JSON list of credentials to load at boot")
    parser.add_argument(
        "--stream-pause-ms",
        type=int,
        default=0,
        help="pause between a streamed answer's events, a slow model (make run's demo: 100)",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.stream_pause_ms <= 10_000:
        parser.error("--stream-pause-ms must be 0..10000")

    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto
    # says TCP, and without it every keep-alive answer waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((args.host, args.port))
    sock.listen(2048)
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if family == socket.AF_INET6 else args.host

    sim = Simulator()
    sim.stream_pause_ms = args.stream_pause_ms
    if args.seed is not None:
        loaded = load_seed(sim, args.seed)
        logging.getLogger("simulator").info("loaded %d credential(s) from %s", loaded, args.seed)
    config = uvicorn.Config(
        create_app(sim),
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
        # Idle connections stay open past any client's own idle limit (httpx's 5 s, the
        # gateway's 60 s): a client that reuses one must not meet the server's close.
        timeout_keep_alive=75,
        # The stock loop and parser, as measured: uvloop and httptools are installed
        # for the gateway, and uvicorn's "auto" would otherwise switch to them here.
        loop="asyncio",
        http="h11",
    )
    server = uvicorn.Server(config)
    # stdout carries only this line; logs go to stderr.
    print(f"simulator listening on http://{host}:{port}", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
