"""`python -m agent_server --host 127.0.0.1 --port PORT` (port 0 picks a free port).

Prints exactly one flushed line, `agent server listening on http://HOST:PORT`, once
the socket is listening, so a parent process can read the port it got (with
LOG_FORMAT=json it is a JSON log line on stderr with that message).
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys

import uvicorn

from agent_server.app import create_app
from agent_server.config import ConfigError, load_config
from agent_server.isolation import IsolationError
from agent_server.logjson import JsonFormatter
from agent_server.redaction import Redactor, install_log_redaction

# How long an idle client connection stays open; the platform's client gives up on an
# idle connection after a third of this.
SERVER_KEEPALIVE_SECONDS = 75


def configure_logging(
    redactor: Redactor, level: str, fmt: str = "plain", *, agent: str = ""
) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(redactor, agent=agent))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # uvicorn's loggers propagate to root (log_config=None below), so this one
    # filtered handler sees every line the process logs.
    install_log_redaction(
        redactor, [root, *(logging.getLogger(n) for n in ("uvicorn", "uvicorn.error"))]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_server", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)

    try:
        config = load_config()
    except ConfigError as exc:
        print(f"agent server: refusing to start: {exc}", file=sys.stderr, flush=True)
        return 2

    redactor = Redactor()
    configure_logging(redactor, args.log_level, config.log_format, agent=config.agent_name)
    try:
        app = create_app(config, redactor=redactor)
    except IsolationError as exc:
        logging.getLogger("agent_server").error("refusing to start: %s", exc)
        return 2

    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    # Listening before the line is printed: a client that connects at once waits in
    # the backlog until uvicorn accepts, instead of being refused.
    sock.listen(128)
    port = sock.getsockname()[1]

    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_config=None,
            log_level=args.log_level,
            # In-flight turns are cancelled after this; cancellation kills their
            # process groups.
            timeout_graceful_shutdown=5,
            # Idle connections stay open well past the platform client's own idle
            # limit (agents/client.py KEEPALIVE_SECONDS): the client always closes
            # first, so it never sends a turn on a connection this server is closing
            # (uvicorn's 5 s default equalled httpx's, and under load a reused
            # connection met the close: "Server disconnected without a response").
            timeout_keep_alive=SERVER_KEEPALIVE_SECONDS,
        )
    )
    logging.getLogger("agent_server").info(
        "runtime=%s model=%s home=%s cli=%s",
        config.runtime,
        config.model or "(runtime default)",
        config.home,
        config.claude_bin if config.runtime == "claude-code" else "-",
    )
    banner = f"agent server listening on http://{args.host}:{port}"
    if config.log_format == "json":
        # Every line is one JSON object; this one's message is the same banner.
        logging.getLogger("agent_server").info(banner)
    else:
        print(banner, flush=True)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
