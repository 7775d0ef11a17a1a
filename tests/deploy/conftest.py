"""The socket proxy's fixtures: deploy/docker_proxy (a package run from deploy/, not
installed) loaded as ``docker_proxy``, and the proxy serving in front of the real
engine `make test` uses (DOCKER_HOST), on the agents' network the container tests
create, with the agent image they build."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import docker
import pytest
from django.test import override_settings

from agents.runtimes.base import SpawnSpec
from agents.runtimes.docker import DockerRuntime
from tests.containers import NETWORK
from trinity.crypto import Secret

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "trinity-agent:latest"
NAME = "trinity-agent-bot"


def load_proxy() -> ModuleType:
    package = ROOT / "deploy" / "docker_proxy"
    spec = importlib.util.spec_from_file_location(
        "docker_proxy", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docker_proxy"] = module  # its modules import each other through it
    spec.loader.exec_module(module)
    return module


proxy = load_proxy()


def named(engine: Any, name: str = NAME) -> list[Any]:
    """What the engine holds under ``name`` (the name filter is a substring match)."""
    return [c for c in engine.containers.list(all=True, filters={"name": name}) if c.name == name]


@pytest.fixture
def proxy_url(engine: Any, agent_image: str, gateway: str) -> Iterator[str]:
    """The proxy in front of the real engine's socket; whatever it let the engine
    create under the agent's name goes after, with its volumes."""
    assert agent_image == IMAGE
    socket_path = os.environ["DOCKER_HOST"].removeprefix("unix://")
    policy = proxy.Policy(image=IMAGE, network=NETWORK)
    server = proxy.serve(policy, listen=("127.0.0.1", 0), engine=socket_path)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    for container in named(engine):
        container.remove(force=True, v=True)


class _Recorded(Exception):
    def __init__(self, name: str, body: dict[str, Any]) -> None:
        super().__init__(name)
        self.name = name
        self.body = body


class _RecordingAPI(docker.APIClient):
    """The docker SDK's own create path, stopped at the wire: the body it would post
    is recorded instead (this one step is a stand-in, for a pure reading of the SDK's
    output; the tests that need the engine send it through the real proxy)."""

    def create_container_from_config(
        self, config: Any, name: Any = None, platform: Any = None
    ) -> Any:
        # _post_json drops the top level's nulls before sending.
        raise _Recorded(name, {k: v for k, v in config.items() if v is not None})


def sdk_create(run_kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(name, body) of the create the docker SDK sends for ``containers.run(**run_kwargs)``."""
    client = docker.DockerClient(base_url="tcp://127.0.0.1:9", version="1.41")
    client.api = _RecordingAPI(base_url="tcp://127.0.0.1:9", version="1.41")
    try:
        client.containers.create(**run_kwargs)
    except _Recorded as recorded:
        return recorded.name, recorded.body
    raise AssertionError("the SDK posted no create")


def spawn_spec() -> SpawnSpec:
    return SpawnSpec(name="bot", runtime="claude-code", model="", secret=Secret("s3cret"))


def runtime_kwargs() -> dict[str, Any]:
    """The runtime's own ``containers.run`` arguments for agent "bot"."""
    with override_settings(TRINITY_AGENT_IMAGE=IMAGE):
        return DockerRuntime()._run_kwargs(spawn_spec(), NETWORK, "x")
