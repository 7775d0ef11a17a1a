"""A stand-in agent server for the client's tests: on loopback TCP (as docker endpoints
are) or on a Unix socket (as local ones are), it answers ``/health?nonce=`` by
``StandIn.mode`` (honestly, with another secret's proof, with a proof replayed from an
earlier nonce, with none, or 503) and every POST with a served turn, recording every
request it receives in ``StandIn.seen``."""

from __future__ import annotations

import json
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from agent_server import contract
from trinity.crypto import Secret
from trinity_contract.proof import health_proof, new_nonce

SECRET = Secret("agent-shared-secret-for-proof-tests")
EARLIER_NONCE = new_nonce()


class StandIn(BaseHTTPRequestHandler):
    """Answers /health by ``mode`` and every POST with a served turn."""

    mode: ClassVar[str] = "honest"
    seen: ClassVar[list[dict[str, Any]]] = []

    def address_string(self) -> str:
        return "test"

    def _send(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        StandIn.seen.append({"method": "GET", "path": self.path, "headers": dict(self.headers)})
        nonce = parse_qs(urlsplit(self.path).query).get("nonce", [""])[0]
        proofs = {
            "honest": lambda: health_proof(secret=SECRET.reveal(), nonce=nonce),
            "wrong secret": lambda: health_proof(secret="not-the-agents-secret", nonce=nonce),
            "replay": lambda: health_proof(secret=SECRET.reveal(), nonce=EARLIER_NONCE),
            "no proof": lambda: None,
        }
        if StandIn.mode == "503":
            self._send(503, {"detail": "starting"})
            return
        self._send(200, {**contract.EXAMPLE_HEALTH_RESPONSE, "proof": proofs[StandIn.mode]()})

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length") or 0)
        StandIn.seen.append(
            {
                "method": "POST",
                "path": self.path,
                "headers": dict(self.headers),
                "body": self.rfile.read(length).decode(),
            }
        )
        self._send(200, contract.EXAMPLE_TASK_RESPONSE)

    def log_message(self, *args: object) -> None:
        pass


class UnixServer(socketserver.ThreadingUnixStreamServer):
    def get_request(self) -> tuple[Any, Any]:
        request, _ = super().get_request()
        return request, ("test", 0)


def serve(
    transport: str, directory: Path, *, reuse: str | None = None
) -> tuple[socketserver.BaseServer, str]:
    server: socketserver.BaseServer
    if transport == "tcp":
        port = int(reuse.rsplit(":", 1)[1]) if reuse else 0
        server = ThreadingHTTPServer(("127.0.0.1", port), StandIn)
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    else:
        path = directory / "server.sock"
        server = UnixServer(str(path), StandIn)
        endpoint = f"unix://{path}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, endpoint


def close(server: socketserver.BaseServer) -> None:
    server.shutdown()
    server.server_close()
    if isinstance(server, UnixServer):
        Path(server.server_address).unlink(missing_ok=True)  # type: ignore[arg-type]
