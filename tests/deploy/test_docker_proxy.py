"""deploy/docker_proxy.py: the only holder of the engine's socket forwards the agent
runtime's calls on agent containers and refuses the rest.

The engine here is a stand-in on a Unix socket that keeps containers in a dict,
answers the Docker API's shapes and records what reached it, so each refusal can be
shown to have forwarded nothing; the client side is the real docker SDK and the real
``DockerRuntime``, pointed at the proxy over TCP as compose points web and worker at
it. The proxy in front of the real engine, with agents started through it, is
tests/deploy/test_compose_up.py.
"""

from __future__ import annotations

import importlib.util
import json
import re
import socketserver
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import docker
import docker.errors
import pytest
from django.test import override_settings

from agents.runtimes.base import SpawnSpec
from agents.runtimes.docker import LABEL, DockerRuntime
from trinity.crypto import Secret

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "trinity-agent:latest"
NETWORK = "trinity-agents"


def _load_proxy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docker_proxy", ROOT / "deploy/docker_proxy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docker_proxy"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


proxy = _load_proxy()


class FakeEngine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The Docker API's container calls over a Unix socket, in memory."""

    daemon_threads = True

    def __init__(self, path: str) -> None:
        self.containers: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status: int, payload: Any = None) -> None:
                body = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _find(self, ref: str) -> dict[str, Any] | None:
                for c in engine.containers.values():
                    if ref in (c["Id"], c["Name"].lstrip("/")):
                        return c
                return None

            def _route(self) -> None:
                parts = urlsplit(self.path)
                path = re.sub(r"^/v\d+\.\d+", "", parts.path)
                query = parse_qs(parts.query)
                length = int(self.headers.get("Content-Length") or 0)
                body: dict[str, Any] = json.loads(self.rfile.read(length)) if length else {}
                engine.calls.append((self.command, path))
                if path == "/_ping":
                    return self._send(200, "OK")
                if path == "/version":
                    return self._send(200, {"ApiVersion": "1.45", "Version": "26.0.0"})
                if path == "/containers/create":
                    cid = uuid.uuid4().hex * 2
                    engine.containers[cid] = {
                        "Id": cid,
                        "Name": "/" + query["name"][0],
                        "Config": {"Labels": body.get("Labels") or {}, "Image": body["Image"]},
                        "State": {"Status": "created"},
                        "NetworkSettings": {"Ports": {}},
                        "HostConfig": body.get("HostConfig") or {},
                    }
                    return self._send(201, {"Id": cid, "Warnings": []})
                if path == "/containers/json":
                    return self._send(200, [{"Id": c["Id"]} for c in engine.containers.values()])
                match = re.match(r"^/containers/([^/]+)(/json|/start|/stop)?$", path)
                if match:
                    found = self._find(match.group(1))
                    if found is None:
                        return self._send(404, {"message": "No such container"})
                    action = match.group(2)
                    if action == "/json" and self.command == "GET":
                        return self._send(200, found)
                    if action == "/start":
                        found["State"]["Status"] = "running"
                        return self._send(204)
                    if action == "/stop":
                        found["State"]["Status"] = "exited"
                        return self._send(204)
                    if action is None and self.command == "DELETE":
                        del engine.containers[found["Id"]]
                        return self._send(204)
                return self._send(404, {"message": "page not found"})

            do_GET = do_POST = do_DELETE = _route  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        super().__init__(path, Handler)

    def add(self, name: str, labels: dict[str, str]) -> str:
        cid = uuid.uuid4().hex * 2
        self.containers[cid] = {
            "Id": cid,
            "Name": f"/{name}",
            "Config": {"Labels": labels, "Image": "postgres:15"},
            "State": {"Status": "running"},
            "NetworkSettings": {"Ports": {}},
            "HostConfig": {},
        }
        return cid


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[FakeEngine]:
    server = FakeEngine(str(tmp_path / "docker.sock"))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy_url(engine: FakeEngine) -> Iterator[str]:
    policy = proxy.Policy(image=IMAGE, network=NETWORK)
    server = proxy.serve(policy, listen=("127.0.0.1", 0), engine=engine.server_address)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def client(proxy_url: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=proxy_url, version="auto", timeout=10)


def spec() -> SpawnSpec:
    return SpawnSpec(name="bot", runtime="claude-code", model="", secret=Secret("s3cret"))


# As under compose: the network is compose's, and the proxy answers no network call.
@override_settings(
    TRINITY_AGENT_IMAGE=IMAGE, TRINITY_DOCKER_NETWORK=NETWORK, TRINITY_DOCKER_NETWORK_CREATE=False
)
def test_the_agent_runtime_starts_inspects_stops_and_discards_through_the_proxy(
    engine: FakeEngine, client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = DockerRuntime(client_factory=lambda: client)
    # Nothing listens at the container's address here (the engine is a stand-in), so
    # the proof wait is replaced: it is not the proxy's business, and it is pinned by
    # tests/docker/test_docker_runtime.py on a real engine; the runtime through the real
    # proxy on a real engine is tests/deploy/test_compose_up.py.
    monkeypatch.setattr(runtime, "_wait_proven", lambda *args: None)

    spawned = runtime.start(spec())
    alive = runtime.is_alive(name="bot", handle=spawned.handle)
    runtime.stop(name="bot", handle=spawned.handle)
    runtime.start(spec())
    runtime.discard(name="bot")

    assert alive is True
    assert engine.containers == {}
    assert ("POST", "/containers/create") in engine.calls


def test_the_runtimes_own_create_passes_the_policy() -> None:
    """The create body the docker SDK builds from DockerRuntime's arguments."""
    from docker.models.containers import _create_container_args

    with override_settings(TRINITY_AGENT_IMAGE=IMAGE):
        kwargs = DockerRuntime()._run_kwargs(spec(), NETWORK, "x")
    args = _create_container_args({**kwargs, "version": "1.45"})
    body = {
        "Image": args["image"],
        "Labels": args["labels"],
        "HostConfig": dict(args["host_config"]),
        "NetworkingConfig": {"EndpointsConfig": args["networking_config"]},
    }
    policy = proxy.Policy(image=IMAGE, network=NETWORK)
    assert proxy.create_refusal(policy, name="trinity-agent-bot", body=body) is None


AGENT = {"image": IMAGE, "labels": {LABEL: "bot"}, "network": NETWORK, "detach": True}


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"volumes": {"/": {"bind": "/host", "mode": "rw"}}}, "Binds"),
        ({"volumes": {"pgdata": {"bind": "/data", "mode": "rw"}}}, "Binds"),
        ({"privileged": True}, "Privileged"),
        ({"cap_add": ["SYS_ADMIN"]}, "CapAdd"),
        ({"devices": ["/dev/sda:/dev/sda"]}, "Devices"),
        ({"pid_mode": "host"}, "PidMode"),
        ({"network_mode": "host", "network": None}, "network only"),
        ({"network": "trinity-backend"}, "network only"),
        ({"image": "alpine:3"}, "agent image"),
        ({"labels": {}}, "label"),
        ({"name": "postgres-2"}, "name must start"),
        ({"ports": {"8080/tcp": ("0.0.0.0", 8080)}}, "loopback only"),  # noqa: S104
        ({"security_opt": ["seccomp=unconfined"]}, "no-new-privileges"),
    ],
)
def test_a_create_that_is_not_an_agent_container_is_refused(
    engine: FakeEngine, client: docker.DockerClient, changes: dict[str, Any], reason: str
) -> None:
    kwargs = {**AGENT, "name": "trinity-agent-bot", **changes}
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    with pytest.raises(docker.errors.APIError) as refused:
        client.containers.create(**kwargs)
    assert refused.value.status_code == 403
    assert reason in str(refused.value)
    assert engine.containers == {}


def test_other_containers_cannot_be_read_stopped_or_removed(
    engine: FakeEngine, client: docker.DockerClient
) -> None:
    postgres = engine.add("postgres", labels={})
    for call in (
        lambda: client.containers.get("postgres"),  # its env holds the DB password
        lambda: client.api.stop(postgres),
        lambda: client.api.remove_container(postgres, force=True),
        lambda: client.api.start(postgres),
    ):
        with pytest.raises(docker.errors.APIError) as refused:
            call()
        assert refused.value.status_code == 404
    assert engine.containers[postgres]["State"]["Status"] == "running"


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.images.list(),
        lambda c: c.images.pull("alpine", tag="3"),
        lambda c: c.volumes.list(),
        lambda c: c.networks.list(),
        lambda c: c.containers.list(all=True),  # unfiltered: would name every container
        lambda c: c.api.exec_create("trinity-agent-bot", "sh"),
        lambda c: c.info(),
    ],
)
def test_every_other_engine_call_is_refused(
    engine: FakeEngine, client: docker.DockerClient, call: Any
) -> None:
    with pytest.raises(docker.errors.APIError) as refused:
        call(client)
    assert refused.value.status_code in (403, 404)
    assert all(path in ("/_ping", "/version") for _, path in engine.calls)


@pytest.mark.parametrize(("host_config", "status"), [({}, 201), ({"Privileged": True}, 403)])
def test_a_chunked_create_is_checked_whole_like_any_other(
    engine: FakeEngine, proxy_url: str, host_config: dict[str, Any], status: int
) -> None:
    import http.client

    host, port = proxy_url.removeprefix("tcp://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    body = json.dumps(
        {"Image": IMAGE, "Labels": {LABEL: "bot"}, "HostConfig": host_config}
    ).encode()
    connection.request(
        "POST",
        "/containers/create?name=trinity-agent-bot",
        body=iter([body[:10], body[10:]]),
        encode_chunked=True,
    )
    response = connection.getresponse()
    assert response.status == status
    assert len(engine.containers) == (1 if status == 201 else 0)
