"""``python -m gateway [--host H] [--port P]``: the gateway's serving process.

Django is set up once (settings, the ORM for the thread pool's reads); then uvicorn
serves ``gateway.server.app.GatewayApp`` on uvloop with httptools' parser (both
installed with the project: they took a third off what the gateway adds to a request,
bench/gateway.py).
The listener sets TCP_NODELAY: the first streamed byte after the headers must not
wait for a delayed ACK.
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import sys

import django

SWITCH_SECONDS = 0.0005


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "trinity.settings")
    django.setup()
    # The thread pool's database work must not hold the event loop off for the
    # interpreter's default 5 ms slices: hand the GIL back ten times as often.
    sys.setswitchinterval(SWITCH_SECONDS)
    import uvicorn
    from django.conf import settings

    from gateway.server.app import GatewayApp

    parser = argparse.ArgumentParser(description="Trinity's gateway")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=settings.TRINITY_GATEWAY_PORT)
    args = parser.parse_args()
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((args.host, args.port))
    sock.listen(1024)
    config = uvicorn.Config(
        GatewayApp(),
        lifespan="on",
        log_config=None,
        access_log=False,
        timeout_keep_alive=75,
        timeout_graceful_shutdown=5,
        loop="uvloop",
        http="httptools",
    )
    # Everything loaded so far (Django, the app) lives as long as the process: out of
    # the collector's sight, a collection walks only what requests allocate.
    gc.freeze()
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
