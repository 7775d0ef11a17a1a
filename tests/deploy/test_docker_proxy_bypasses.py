"""Requests no SDK sends, as raw bytes through the real proxy in front of the real
engine: each reads one way to a naive filter and another way to the engine (Go's JSON
decoder matches keys case-insensitively, lets the last duplicate win and merges two
objects for one field; the engine still reads a deprecated host config at the body's
top level and, below API 1.24, in a start's body). Each is refused, and the engine
shows it reached nothing: no container, no volume, no file in the host directory the
body tried to reach.

Every body is the runtime's own create as the docker SDK sends it (conftest.py
``sdk_create``), with one change, and a command that writes its uid into ``/host`` and
the work area: a container that got a host mount leaves a root-owned file there.
The unchanged body is created (the control), so each refusal is the change's.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents.runtimes.docker import LABEL, WORK_AREA
from tests.deploy.conftest import NAME, named, runtime_kwargs, sdk_create

WRITER = ["sh", "-c", f"for d in /host {WORK_AREA}; do id -u > $d/by-uid-$(id -u); done; true"]
CREATE = f"/v1.41/containers/create?name={NAME}"


class Pairs(list[tuple[str, Any]]):
    """A JSON object as written on the wire, duplicate keys and all."""


def raw(value: Any) -> str:
    if isinstance(value, dict):
        value = Pairs(value.items())
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{raw(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(raw(item) for item in value) + "]"
    return json.dumps(value)


def base_body() -> dict[str, Any]:
    """The runtime's create, without its CapAdd (which the proxy this replaced refused,
    so that proxy took every body here but for the change), running WRITER."""
    _, body = sdk_create(runtime_kwargs())
    host = {k: v for k, v in body["HostConfig"].items() if k != "CapAdd"}
    return {**body, "HostConfig": host, "Cmd": WRITER, "Labels": {LABEL: "bot"}}


@dataclass(frozen=True)
class Reach:
    """What a bypass aims at: a host directory, another network, another image."""

    host_dir: str
    network: str
    image: str


def _host(body: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**body, "HostConfig": {**body["HostConfig"], **changes}}


def _renamed_host_config(key: str) -> Callable[[dict[str, Any], Reach], Any]:
    def change(body: dict[str, Any], at: Reach) -> Any:
        host = {**body["HostConfig"], "Binds": [f"{at.host_dir}:/host"]}
        return {**{k: v for k, v in body.items() if k != "HostConfig"}, key: host}

    return change


def _top_level_binds(body: dict[str, Any], at: Reach) -> Any:
    top = {k: v for k, v in body.items() if k != "HostConfig"}
    return {**top, **body["HostConfig"], "Binds": [f"{at.host_dir}:/host"]}


def _duplicate_host_config(body: dict[str, Any], at: Reach) -> Any:
    extra = {"Privileged": True, "Binds": [f"{at.host_dir}:/host"]}
    return Pairs([*body.items(), ("hostconfig", extra)])


def _volume_driver_bind(body: dict[str, Any], at: Reach) -> Any:
    options = {"type": "none", "o": "bind", "device": at.host_dir}
    mount = {
        "Type": "volume",
        "Target": WORK_AREA,
        "VolumeOptions": {"DriverConfig": {"Name": "local", "Options": options}},
    }
    return _host(body, Mounts=[mount])


def _duplicate_type(body: dict[str, Any], at: Reach) -> Any:
    mount = Pairs(
        [("Type", "tmpfs"), ("type", "bind"), ("source", at.host_dir), ("Target", "/host")]
    )
    return _host(body, Mounts=[mount])


def _duplicate_host_ip(body: dict[str, Any], at: Reach) -> Any:
    binding = Pairs([("HostIp", "127.0.0.1"), ("hostIp", "0.0.0.0"), ("HostPort", "18080")])  # noqa: S104
    published = _host(body, PortBindings={"8080/tcp": [binding]})
    return {**published, "ExposedPorts": {"8080/tcp": {}}}


def _duplicate_image(body: dict[str, Any], at: Reach) -> Any:
    return Pairs([*body.items(), ("image", at.image)])


def _endpoints_elsewhere(body: dict[str, Any], at: Reach) -> Any:
    return {**body, "NetworkingConfig": {"endpointsConfig": {at.network: {}}}}


BYPASSES: dict[str, Callable[[dict[str, Any], Reach], Any]] = {
    "lower-case-hostConfig-with-binds": _renamed_host_config("hostConfig"),
    "long-s-HostConfig-with-binds": _renamed_host_config("Ho\u017ftConfig"),
    "top-level-deprecated-host-config-binds": _top_level_binds,
    "case-duplicate-HostConfig-merging-privileged-and-binds": _duplicate_host_config,
    "anonymous-volume-local-driver-binding-the-host": _volume_driver_bind,
    "duplicate-Type-tmpfs-to-bind": _duplicate_type,
    "duplicate-HostIp-publishing-everywhere": _duplicate_host_ip,
    "duplicate-Image": _duplicate_image,
    "lower-case-endpointsConfig-joining-another-network": _endpoints_elsewhere,
    "unknown-key": lambda body, at: {**body, "Unknown": True},
}


def send(url: str, method: str, target: str, body: bytes | None = None) -> tuple[int, str]:
    host, port = url.removeprefix("tcp://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    try:
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


@pytest.fixture
def reach(engine: Any, tmp_path: Path) -> Iterator[Reach]:
    """An empty host directory, a network that is not the agents', an image that is
    not the agent's."""
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    network = engine.networks.create(f"trinity-elsewhere-{os.getpid()}", internal=True)
    image = next(tag for i in engine.images.list("trinity-base") for tag in i.tags)
    yield Reach(host_dir=str(host_dir), network=network.name, image=image)
    network.remove()


def outcome(engine: Any, proxy_url: str, status: int, answer: str, reach: Reach) -> Any:
    """What the attempt left: a created container is started through the proxy, as its
    sender would, and run to its end; then the engine's containers and volumes under
    the agent's name and the host directory's files, with their owners."""
    created = named(engine)
    if status == 201:
        send(proxy_url, "POST", f"/containers/{json.loads(answer)['Id']}/start")
        for container in created:
            container.wait(timeout=60)
    volumes = [m["Name"] for c in created for m in c.attrs["Mounts"] if m["Type"] == "volume"]
    files = [(p.name, p.stat().st_uid) for p in Path(reach.host_dir).iterdir()]
    return [c.name for c in created], volumes, files


def test_the_unchanged_body_is_an_agents_create_and_passes(
    engine: Any, proxy_url: str, reach: Reach
) -> None:
    status, answer = send(proxy_url, "POST", CREATE, raw(base_body()).encode())

    assert status == 201, answer
    names, volumes, files = outcome(engine, proxy_url, status, answer, reach)
    assert (names, len(volumes), files) == ([NAME], 1, [])


@pytest.mark.parametrize("bypass", list(BYPASSES.values()), ids=list(BYPASSES))
def test_a_create_the_engine_reads_otherwise_is_refused_and_creates_nothing(
    engine: Any, proxy_url: str, reach: Reach, bypass: Callable[[dict[str, Any], Reach], Any]
) -> None:
    volumes_before = {v.id for v in engine.volumes.list()}
    body = raw(bypass(base_body(), reach)).encode()

    status, answer = send(proxy_url, "POST", CREATE, body)

    assert outcome(engine, proxy_url, status, answer, reach) == ([], [], []), answer[:300]
    assert status in (400, 403) and "docker proxy" in answer, answer
    assert {v.id for v in engine.volumes.list()} == volumes_before


@pytest.mark.parametrize("version", ["/v1.23", "/v1.41", ""])
def test_a_start_with_a_body_is_refused_whatever_the_api_version(
    engine: Any, proxy_url: str, reach: Reach, version: str
) -> None:
    """Below API 1.24 the engine applies a start's body as the container's host config
    (binds, privileges) when it starts it; no start carries one through the proxy."""
    status, answer = send(proxy_url, "POST", CREATE, raw(base_body()).encode())
    assert status == 201, answer
    container_id = json.loads(answer)["Id"]
    host_config = {"Binds": [f"{reach.host_dir}:/host"], "Privileged": True}

    status, answer = send(
        proxy_url,
        "POST",
        f"{version}/containers/{container_id}/start",
        json.dumps(host_config).encode(),
    )

    [container] = named(engine)
    assert container.status == "created", answer
    assert container.attrs["HostConfig"]["Binds"] is None
    assert list(Path(reach.host_dir).iterdir()) == []
    assert status in (400, 403) and "docker proxy" in answer, answer


@pytest.mark.parametrize(
    "target",
    [
        f"{CREATE}&name=trinity-agent-other",  # repeated: Go reads the first, Python's last
        f"{CREATE};name=postgres",  # ';': a separator to old Go, an error to new
        f"{CREATE}&platform=linux",  # a parameter the runtime does not send
        f"{CREATE}%0a",
        f"/v1.23/containers/create?name={NAME}",  # an API version read differently
        f"/v1/containers/create?name={NAME}",
        f"/v1.41/containers/%63reate?name={NAME}",  # the engine decodes the path
        f"//containers/create?name={NAME}",  # and cleans it (redirecting)
        f"/v1.41/containers/./create?name={NAME}",
        f"/v1.41/containers/create/?name={NAME}",
        f"http://docker/v1.41/containers/create?name={NAME}",  # absolute form
    ],
)
def test_a_create_target_read_otherwise_is_refused(
    engine: Any, proxy_url: str, reach: Reach, target: str
) -> None:
    status, answer = send(proxy_url, "POST", target, raw(base_body()).encode())

    assert [c.name for c in engine.containers.list(all=True, filters={"label": LABEL})] == []
    assert status in (400, 403) and "docker proxy" in answer, answer


def _exchange(url: str, request: bytes) -> tuple[bytes, bytes | None]:
    """Send ``request`` on one connection; (the status line, what followed the first
    response: b"" when the proxy closed the connection, None when it kept it open)."""
    host, port = url.removeprefix("tcp://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        stream = sock.makefile("rb")
        status_line = stream.readline()
        length = 0
        while (line := stream.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        stream.read(length)
        sock.settimeout(2)
        try:
            return status_line, stream.read()
        except TimeoutError:
            return status_line, None


def _framed(headers: str, body: bytes) -> bytes:
    head = f"POST {CREATE} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n"
    return head.encode() + headers.encode() + b"\r\n" + body


def _chunk(data: bytes, size: str | None = None) -> bytes:
    return (size or format(len(data), "x")).encode() + b"\r\n" + data + b"\r\n"


@pytest.mark.parametrize(
    ("headers", "framing"),
    [
        ("Content-Length: {n}\r\nTransfer-Encoding: chunked\r\n", "chunked"),
        ("Transfer-Encoding: chunked\r\nContent-Length: {n}\r\n", "chunked"),
        ("Transfer-Encoding: chunked, identity\r\n", "chunked"),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "chunked"),
        ("Content-Length: {n}\r\nContent-Length: {n}\r\n", "length"),
        ("Content-Length: +{n}\r\n", "length"),
        ("Transfer-Encoding: chunked\r\n", "0x-size"),
        ("Transfer-Encoding: chunked\r\n", "underscore-size"),
        ("Transfer-Encoding: chunked\r\n", "trailer"),
        ("Content-Length : {n}\r\n", "length"),
    ],
)
def test_a_body_framed_ambiguously_is_refused_and_the_connection_closed(
    engine: Any, proxy_url: str, headers: str, framing: str
) -> None:
    """The engine never sees the client's framing (the proxy sends it a request of its
    own); these are refused so the proxy itself never guesses where a body ends."""
    body = raw(base_body()).encode()
    size = format(len(body), "x")
    encoded = {
        "length": body,
        "chunked": _chunk(body) + b"0\r\n\r\n",
        "0x-size": _chunk(body, f"0x{size}") + b"0\r\n\r\n",
        "underscore-size": _chunk(body, f"{size[0]}_{size[1:]}") + b"0\r\n\r\n",
        "trailer": _chunk(body) + b"0\r\nX-Trailer: 1\r\n\r\n",
    }[framing]

    status_line, rest = _exchange(proxy_url, _framed(headers.format(n=len(body)), encoded))

    assert status_line.split()[1] == b"400", status_line
    assert rest == b""
    assert named(engine) == []


@pytest.mark.parametrize(("privileged", "status"), [(False, 201), (True, 403)])
def test_a_chunked_create_is_checked_whole_like_any_other(
    engine: Any, proxy_url: str, privileged: bool, status: int
) -> None:
    body = base_body()
    if privileged:
        body = _host(body, Privileged=True)
    data = raw(body).encode()
    chunked = _chunk(data[:10]) + _chunk(data[10:]) + b"0\r\n\r\n"

    status_line, _ = _exchange(proxy_url, _framed("Transfer-Encoding: chunked\r\n", chunked))

    assert int(status_line.split()[1]) == status, status_line
    assert len(named(engine)) == (1 if status == 201 else 0)
