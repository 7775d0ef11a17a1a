"""The proxy's HTTP side: read a request whole, decide, and send the engine a request
of its own.

Every request is read as the engine would read it or refused (target.py, framing.py,
gojson.py); what is forwarded is built from what was read: the target from the route,
version and canonical query, a create's body from the allowlist (create.py), and no
body on any other call. The engine is called over its Unix socket, one connection per
call. A refusal is answered with its status and logged as method, path and reason,
escaped; a body is never logged.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .create import create_reader
from .framing import read_body
from .gojson import read_json
from .policy import Policy, Refused, shown
from .queries import container_query, create_query, list_query
from .target import Call, read_call

logger = logging.getLogger("docker_proxy")

ENGINE_TIMEOUT = 120.0
_FULL_ID = re.compile(r"[0-9a-f]{64}")
_HOP_BY_HOP = frozenset({"transfer-encoding", "connection", "content-length", "keep-alive"})


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=ENGINE_TIMEOUT)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(ENGINE_TIMEOUT)
        sock.connect(self._path)
        self.sock = sock


@dataclass(frozen=True)
class EngineAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def engine_call(engine: str, method: str, target: str, body: bytes | None = None) -> EngineAnswer:
    """One call on the engine's socket, with the proxy's own headers only."""
    headers = {"Host": "docker"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    connection = _UnixConnection(engine)
    try:
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        return EngineAnswer(response.status, response.getheaders(), response.read())
    finally:
        connection.close()


def agent_container_id(engine: str, ref: str, label: str) -> str:
    """The full id of container ``ref`` when the engine says it carries ``label``;
    raises Refused (404) otherwise. The action then goes to that id, so a name cannot
    be moved to another container in between."""
    answer = engine_call(engine, "GET", f"/containers/{ref}/json")
    if answer.status == 200:
        attrs = json.loads(answer.body)
        labels = (attrs.get("Config") or {}).get("Labels") or {}
        if label in labels and _FULL_ID.fullmatch(str(attrs.get("Id"))):
            return str(attrs["Id"])
    raise Refused("no such agent container", 404)


def decide(policy: Policy, engine: str) -> Callable[[Call, bytes], tuple[str, bytes | None]]:
    """The function that turns a read call and its body into what goes to the engine
    (target, body), or raises Refused."""
    read_create = create_reader(policy)

    def forward(call: Call, body: bytes) -> tuple[str, bytes | None]:
        if call.route == "create":
            rebuilt = json.dumps(read_create(read_json(body), "create")).encode()
            return call.with_query(create_query(policy, call.query)).target(), rebuilt
        if body:
            raise Refused("this call carries no body (an old API reads a start's as a host config)")
        if call.route in ("ping", "version"):
            return call.with_query({}).target(), None
        if call.route == "list":
            return call.with_query(list_query(policy, call.query)).target(), None
        assert call.ref is not None  # every other route names a container
        container_id = agent_container_id(engine, call.ref, policy.label)
        query = container_query(call.route, call.query)
        return call.with_query(query, ref=container_id).target(), None

    return forward


def make_handler(policy: Policy, engine: str) -> type[BaseHTTPRequestHandler]:
    forward = decide(policy, engine)

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
            target, rebuilt = forward(read_call(self.command, sent), body)
            answer = engine_call(engine, self.command, target, rebuilt)
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
