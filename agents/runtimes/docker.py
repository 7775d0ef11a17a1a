"""Agent servers as docker containers (production), through the docker SDK.

The container's environment is fixed at create time, so anything that changes the
baseline credential (a mode change, a reload fallback) recreates the container.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
from django.conf import settings

from agents.runtimes.base import Spawned, SpawnSpec

logger = logging.getLogger(__name__)

CONTAINER_PORT = 8080
STARTUP_TIMEOUT = 60.0
LABEL = "trinity.agent"


def _default_client() -> Any:
    import docker

    return docker.from_env()


class DockerRuntime:
    name = "docker"

    def __init__(self, client_factory: Callable[[], Any] = _default_client) -> None:
        self._client_factory = client_factory

    def container_name(self, agent_name: str) -> str:
        return f"trinity-agent-{agent_name}"

    def start(self, spec: SpawnSpec) -> Spawned:
        import docker.errors

        client = self._client_factory()
        name = self.container_name(spec.name)
        try:  # a leftover container of the same name would make create fail
            client.containers.get(name).remove(force=True)
        except docker.errors.NotFound:
            pass
        network = settings.TRINITY_DOCKER_NETWORK
        env = {**spec.environment(), "TRINITY_AGENT_HOME": "/home/agent/work"}
        run_kwargs: dict[str, Any] = {
            "image": settings.TRINITY_AGENT_IMAGE,
            "name": name,
            "command": [
                "python",
                "-m",
                "agent_server",
                "--host",
                "0.0.0.0",  # noqa: S104 - inside the container
                "--port",
                str(CONTAINER_PORT),
            ],
            "environment": env,
            "detach": True,
            "labels": {LABEL: spec.name},
            "restart_policy": {"Name": "unless-stopped"},
            "mem_limit": settings.TRINITY_AGENT_MEMORY_LIMIT,
        }
        if network:
            run_kwargs["network"] = network
        else:
            run_kwargs["ports"] = {f"{CONTAINER_PORT}/tcp": ("127.0.0.1", None)}
        container = client.containers.run(**run_kwargs)
        container.reload()
        if network:
            endpoint = f"http://{name}:{CONTAINER_PORT}"
        else:
            host_port = container.attrs["NetworkSettings"]["Ports"][f"{CONTAINER_PORT}/tcp"][0][
                "HostPort"
            ]
            endpoint = f"http://127.0.0.1:{host_port}"
        self._wait_healthy(endpoint, spec.name)
        logger.info(
            "agent %s started in container %s at %s", spec.name, container.short_id, endpoint
        )
        return Spawned(endpoint=endpoint, handle=str(container.id))

    def _wait_healthy(self, endpoint: str, agent_name: str) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{endpoint}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"agent container for {agent_name!r} did not answer /health in time")

    def stop(self, *, name: str, handle: str) -> None:
        import docker.errors

        client = self._client_factory()
        try:
            container = client.containers.get(handle)
        except docker.errors.NotFound:
            return
        container.stop(timeout=10)
        container.remove(force=True)

    def is_alive(self, *, name: str, handle: str) -> bool:
        import docker.errors

        try:
            container = self._client_factory().containers.get(handle)
        except docker.errors.NotFound:
            return False
        return bool(container.status == "running")
