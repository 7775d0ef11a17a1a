"""The proxy's HTTP side: read a request whole, decide, and send the engine a request
of its own.

Every request is read as the engine would read it or refused (target.py, framing.py,
gojson.py); what is forwarded is built from what was read (decide.py): the target from
the route, version and canonical query, a create's body from its allowlist (create.py,
service.py, secret.py, network.py), and no body on any other call. The engine is
called over its Unix socket, one connection per call (engine.py). A refusal is
answered with its status and logged as method, path and reason, escaped; a body is
never logged.
"""

from __future__ import annotations

import http.client
import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .decide import Decide
from .engine import engine_call
from .framing import read_body
from .policy import Policy, Refused, shown
from .target import read_call

logger = logging.getLogger("docker_proxy")

_HOP_BY_HOP = frozenset({"transfer-encoding", "connection", "content-length", "keep-alive"})


def make_handler(policy: Policy, engine: str) -> type[BaseHTTPRequestHandler]:
    decide = Decide(policy, engine)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _refuse(self, refusal: Refused) -> None:
            path = self.path.partition("?")[0]
            logger.warning("refused %s %s: %s", self.command, shown(path), refusal.reason)
            payload = json.dumps({"message": f"docker proxy: {refusal.reason}"}).encode()
            self._send(refusal.status, [("Content-Type", "application/json")], payload)

        def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for name, value in headers:
                if name.lower() not in _HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _handle(self) -> None:
            if self.request_version not in ("HTTP/1.0", "HTTP/1.1"):
                raise Refused("HTTP/1.0 or HTTP/1.1 only", 400)
            body = read_body(self.headers, self.rfile)
            # The target as sent: http.server rewrites a leading "//" in self.path,
            # which the engine would not (it redirects to the cleaned path).
            sent = self.requestline.split()[1]
            forward = decide(read_call(self.command, sent), body)
            answer = forward.answer(engine_call(engine, self.command, forward.target, forward.body))
            self._send(answer.status, answer.headers, answer.body)

        def _safely(self) -> None:
            try:
                self._handle()
            except Refused as refusal:
                # After a 400 the proxy may not know where the next request starts.
                self.close_connection = self.close_connection or refusal.status == 400
                self._refuse(refusal)
            except (OSError, ValueError, http.client.HTTPException) as exc:
                self.close_connection = True
                logger.warning("%s %s failed: %s", self.command, shown(self.path), type(exc))
                self._refuse(Refused(f"engine call failed ({type(exc).__name__})", 502))

        do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = do_PATCH = _safely  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # refusals are logged above; an access log would add nothing

    return Handler


def serve(policy: Policy, *, listen: tuple[str, int], engine: str) -> ThreadingHTTPServer:
    """A server (not yet serving) that applies ``policy`` in front of ``engine``."""
    return ThreadingHTTPServer(listen, make_handler(policy, engine))
