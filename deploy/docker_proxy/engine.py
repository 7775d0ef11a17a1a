"""The proxy's calls on the engine: one request over the engine's Unix socket per
call, with the proxy's own headers and a body it built itself."""

from __future__ import annotations

import http.client
import json
import socket
from dataclasses import dataclass
from typing import Any

from .policy import Refused

ENGINE_TIMEOUT = 120.0


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


def engine_read(engine: str, target: str) -> Any | None:
    """The JSON the engine answers to ``GET target``; None when it has no such object
    (404). Raises Refused (502) on any other answer: the proxy cannot check then."""
    answer = engine_call(engine, "GET", target)
    if answer.status == 404:
        return None
    if answer.status != 200:
        raise Refused(f"the engine answered the proxy's check with {answer.status}", 502)
    return json.loads(answer.body)
