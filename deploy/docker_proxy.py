"""A filtering proxy in front of the Docker engine's socket: agent containers only.

Web and worker start, inspect, stop and remove agent containers (agents/runtimes/
docker.py, through the docker SDK). Whoever holds the engine's socket is root on the
host, so neither holds it: they speak the Docker API to this proxy over an internal
network, and this proxy, the only process with the socket, forwards a request only
when it is one the agent runtime makes, on a container that is an agent's:

- ``GET /_ping``, ``GET /version``: the SDK's handshake;
- ``POST /containers/create?name=<prefix>...``: the image is the agent image, the
  agent label is set, the network is the agents' network, and the host config holds
  only the keys in ``HOST_CONFIG_ALLOWED`` (no bind mounts, no named volumes, no
  privileges, capabilities, devices or host namespaces, ports on loopback only);
- ``GET /containers/json``: only with a filter on the agent label;
- ``GET /containers/{id}/json``, ``POST /containers/{id}/start``, ``POST
  /containers/{id}/stop``, ``DELETE /containers/{id}``: only when the engine says the
  container carries the agent label (checked first, then the action is sent to the
  full id the check returned, so a name cannot be swapped in between).

Everything else (exec, images, volumes, networks, build, the swarm API, any other
container) is refused with 403 and logged as method and path; a body is never logged
(a create's environment carries the agent's secret). Standard library only, so the
proxy runs from the backend image with nothing else installed.

Configured from the environment: DOCKER_PROXY_IMAGE and DOCKER_PROXY_NETWORK
(required), DOCKER_PROXY_LISTEN (``0.0.0.0:2375``), DOCKER_PROXY_ENGINE
(``/var/run/docker.sock``), DOCKER_PROXY_LABEL (``trinity.agent``),
DOCKER_PROXY_NAME_PREFIX (``trinity-agent-``).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import socket
import sys
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

logger = logging.getLogger("docker_proxy")

MAX_BODY = 1024 * 1024
ENGINE_TIMEOUT = 120.0
_VERSION = r"(?:/v\d+\.\d+)?"
_ID = r"([A-Za-z0-9][A-Za-z0-9_.-]{0,127})"
PING = re.compile(rf"^{_VERSION}/(_ping|version)$")
CREATE = re.compile(rf"^{_VERSION}/containers/create$")
LIST = re.compile(rf"^{_VERSION}/containers/json$")
INSPECT = re.compile(rf"^{_VERSION}/containers/{_ID}/json$")
ACTION = re.compile(rf"^{_VERSION}/containers/{_ID}/(start|stop)$")
REMOVE = re.compile(rf"^{_VERSION}/containers/{_ID}$")

# Host-config keys a create may carry; anything else (Binds, Privileged, CapAdd,
# Devices, PidMode, IpcMode, UTSMode, UsernsMode, VolumesFrom, CgroupParent, Sysctls,
# DeviceRequests, Runtime, ExtraHosts, Dns...) is refused. Hardening options are in:
# the runtime may tighten an agent's container, never loosen it.
HOST_CONFIG_ALLOWED = frozenset(
    {
        "NetworkMode",
        "RestartPolicy",
        "Memory",
        "MemorySwap",
        "NanoCpus",
        "CpuShares",
        "PidsLimit",
        "PortBindings",
        "CapDrop",
        "ReadonlyRootfs",
        "SecurityOpt",
        "Tmpfs",
        "Mounts",
        "LogConfig",
        "Init",
        "ShmSize",
        "Ulimits",
    }
)


@dataclass(frozen=True)
class Policy:
    image: str
    network: str
    label: str = "trinity.agent"
    name_prefix: str = "trinity-agent-"


def _falsy(value: Any) -> bool:
    return value in (None, "", [], {}, 0, False)


def create_refusal(policy: Policy, *, name: str, body: dict[str, Any]) -> str | None:
    """Why a container create may not go to the engine, or None when it may. Pure."""
    if not name.startswith(policy.name_prefix):
        return f"the container name must start with {policy.name_prefix!r}"
    if body.get("Image") != policy.image:
        return "only the agent image may be started"
    if policy.label not in (body.get("Labels") or {}):
        return f"an agent container carries the {policy.label!r} label"
    host = body.get("HostConfig") or {}
    extra = sorted(k for k, v in host.items() if k not in HOST_CONFIG_ALLOWED and not _falsy(v))
    if extra:
        return f"host config not allowed for an agent: {', '.join(extra)}"
    if host.get("NetworkMode", policy.network) != policy.network:
        return f"an agent container joins the {policy.network!r} network only"
    endpoints = (body.get("NetworkingConfig") or {}).get("EndpointsConfig") or {}
    if set(endpoints) - {policy.network}:
        return f"an agent container joins the {policy.network!r} network only"
    for bindings in (host.get("PortBindings") or {}).values():
        for binding in bindings or []:
            if (binding or {}).get("HostIp") not in ("127.0.0.1", "::1"):
                return "an agent's port may be published on loopback only"
    for mount in host.get("Mounts") or []:
        if mount.get("Type") not in ("tmpfs", "volume") or mount.get("Source"):
            return "an agent gets anonymous volumes and tmpfs only"
    for option in host.get("SecurityOpt") or []:
        if not str(option).startswith("no-new-privileges"):
            return "the only security option an agent may set is no-new-privileges"
    return None


def list_refusal(policy: Policy, *, query: dict[str, list[str]]) -> str | None:
    """A list must filter on the agent label (it would name every container else)."""
    try:
        filters = json.loads((query.get("filters") or ["{}"])[0])
    except ValueError:
        return "the filters are not JSON"
    labels = filters.get("label") if isinstance(filters, dict) else None
    if isinstance(labels, dict):
        labels = list(labels)
    if not labels or not all(
        str(entry) == policy.label or str(entry).startswith(f"{policy.label}=") for entry in labels
    ):
        return f"a list filters on the {policy.label!r} label"
    return None


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


def _engine(
    engine: str, method: str, target: str, body: bytes | None, headers: dict[str, str]
) -> EngineAnswer:
    connection = _UnixConnection(engine)
    try:
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        return EngineAnswer(response.status, response.getheaders(), response.read())
    finally:
        connection.close()


def make_handler(policy: Policy, engine: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _refuse(self, status: int, reason: str) -> None:
            logger.warning("refused %s %s: %s", self.command, urlsplit(self.path).path, reason)
            payload = json.dumps({"message": f"docker proxy: {reason}"}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _reply(self, answer: EngineAnswer) -> None:
            self.send_response(answer.status)
            for name, value in answer.headers:
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        def _body(self) -> bytes | None:
            """The whole request body, de-chunked, at most MAX_BODY bytes: it is checked
            whole and forwarded with a length, never streamed past the check."""
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                chunks: list[bytes] = []
                while True:
                    size = int(self.rfile.readline(64).split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline(64)  # the blank line after the last chunk
                        break
                    if sum(map(len, chunks)) + size > MAX_BODY:
                        raise ValueError("request body too large")
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline(64)
                return b"".join(chunks)
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                raise ValueError("request body too large")
            return self.rfile.read(length) if length else None

        def _forward(self, target: str, body: bytes | None) -> None:
            headers = {"Host": "docker"}
            if body is not None:
                headers["Content-Type"] = self.headers.get("Content-Type", "application/json")
            self._reply(_engine(engine, self.command, target, body, headers))

        def _agent_id(self, ref: str) -> str | None:
            """The full id of ``ref`` when it is an agent's container, else None."""
            answer = _engine(engine, "GET", f"/containers/{quote(ref)}/json", None, {})
            if answer.status != 200:
                return None
            attrs = json.loads(answer.body)
            labels = (attrs.get("Config") or {}).get("Labels") or {}
            return str(attrs["Id"]) if policy.label in labels else None

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            path, query = parts.path, parse_qs(parts.query)
            body = self._body()
            method = self.command
            if method in ("GET", "HEAD") and PING.match(path):
                return self._forward(self.path, None)
            if method == "POST" and CREATE.match(path):
                try:
                    config = json.loads(body or b"{}")
                except ValueError:
                    return self._refuse(400, "the create body is not JSON")
                name = (query.get("name") or [""])[0]
                reason = create_refusal(policy, name=name, body=config)
                if reason is not None:
                    return self._refuse(403, reason)
                return self._forward(self.path, body)
            if method == "GET" and LIST.match(path):
                reason = list_refusal(policy, query=query)
                if reason is not None:
                    return self._refuse(403, reason)
                return self._forward(self.path, None)
            for pattern, allowed_method in ((INSPECT, "GET"), (ACTION, "POST"), (REMOVE, "DELETE")):
                match = pattern.match(path)
                if match is None or method != allowed_method:
                    continue
                container_id = self._agent_id(match.group(1))
                if container_id is None:
                    return self._refuse(404, "no such agent container")
                # The same call, on the full id the check answered for.
                target = path[: match.start(1)] + container_id + path[match.end(1) :]
                if parts.query:
                    target += f"?{parts.query}"
                return self._forward(target, body)
            return self._refuse(403, "not an agent runtime call")

        def _safely(self) -> None:
            try:
                self._handle()
            except ValueError as exc:
                self.close_connection = True
                self._refuse(400, str(exc))
            except (OSError, KeyError) as exc:
                logger.warning("%s %s failed: %s", self.command, urlsplit(self.path).path, exc)
                self._refuse(502, f"engine call failed ({type(exc).__name__})")

        do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _safely  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # refusals are logged above; an access log would add nothing

    return Handler


def serve(policy: Policy, *, listen: tuple[str, int], engine: str) -> ThreadingHTTPServer:
    """A server (not yet serving) that applies ``policy`` in front of ``engine``."""
    return ThreadingHTTPServer(listen, make_handler(policy, engine))


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    image, network = os.environ.get("DOCKER_PROXY_IMAGE"), os.environ.get("DOCKER_PROXY_NETWORK")
    if not image or not network:
        sys.exit("DOCKER_PROXY_IMAGE and DOCKER_PROXY_NETWORK must be set")
    host, _, port = os.environ.get("DOCKER_PROXY_LISTEN", "0.0.0.0:2375").rpartition(":")  # noqa: S104
    policy = Policy(
        image=image,
        network=network,
        label=os.environ.get("DOCKER_PROXY_LABEL", "trinity.agent"),
        name_prefix=os.environ.get("DOCKER_PROXY_NAME_PREFIX", "trinity-agent-"),
    )
    server = serve(
        policy,
        listen=(host, int(port)),
        engine=os.environ.get("DOCKER_PROXY_ENGINE", "/var/run/docker.sock"),
    )
    logger.info("docker proxy on %s:%s for image %s, network %s", host, port, image, network)
    server.serve_forever()


if __name__ == "__main__":
    main()
