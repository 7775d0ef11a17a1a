"""Agent servers as Docker Swarm services, across the swarm's nodes.

Each agent is one service of one replica (agents/runtimes/swarm_spec.py says what it
runs and how it is hardened) on the agents' overlay network, its environment in a
swarm secret of its own. The platform reaches it by the service's name on that
network (TRINITY_SWARM_ENDPOINT=name, the stack's web and worker are on it), or, from
outside the swarm's networks, at the port published on its task's node (``published``).

The service name is the exclusive claim on an agent's server: the managers' store
refuses a second service of a taken name (409), so of two racing starts exactly one
creates a service. A start removes only what it created (its secret, its service),
plus one kind of leftover by an explicit rule: a service labelled as this agent's
whose task will never serve again, because it ended (restart policy none: it stays
down) or because its node is down (a lost node). Then the start creates the agent's
service anew, and the scheduler places it on a node that is up: that is how a turn
revives an agent whose node died. Anything else holding the name (a task still
starting or running on a live node, an unlabelled service) is left alone and the start
fails with StartConflict.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings

from agents.client import AgentServerClient
from agents.runtimes.base import Spawned, SpawnSpec, StartConflict
from agents.runtimes.docker import IMAGE_RUNTIMES, NETWORK_LABEL, STARTUP_TIMEOUT, wait_proven
from agents.runtimes.swarm_spec import (
    CONTAINER_PORT,
    LABEL,
    START_LABEL,
    secret_name,
    service_body,
)
from agents.runtimes.swarm_tasks import ServiceState, service_state
from trinity_contract.redaction import redact

logger = logging.getLogger(__name__)

CONFLICT = 409


def _default_client() -> Any:
    import docker

    if settings.TRINITY_SWARM_DOCKER_HOST:
        return docker.DockerClient(base_url=settings.TRINITY_SWARM_DOCKER_HOST)
    return docker.from_env()


def agents_overlay(client: Any) -> str:
    """The agents' overlay network's id: created when missing and
    TRINITY_SWARM_NETWORK_CREATE allows it (encrypted unless
    TRINITY_SWARM_NETWORK_ENCRYPTED is off), else taken as the stack made it. Of
    several of that name (two first starts raced) the oldest is the one."""
    import docker.errors

    name = settings.TRINITY_SWARM_NETWORK
    found = [n for n in client.api.networks(names=[name]) if n["Name"] == name]
    if not found and settings.TRINITY_SWARM_NETWORK_CREATE:
        options = {"encrypted": ""} if settings.TRINITY_SWARM_NETWORK_ENCRYPTED else {}
        try:
            client.api.create_network(
                name,
                driver="overlay",
                options=options,
                labels={NETWORK_LABEL: "agents"},
                check_duplicate=True,
            )
        except docker.errors.APIError as exc:
            if exc.status_code != CONFLICT:
                raise
        found = [n for n in client.api.networks(names=[name]) if n["Name"] == name]
    if not found:
        raise RuntimeError(f"the agents' overlay network {name!r} is missing")
    oldest = min(found, key=lambda n: (n.get("Created", ""), n["Id"]))
    return str(oldest["Id"])


class SwarmRuntime:
    name = "swarm"
    contained = True  # one agent per task: its own container on some node

    def __init__(self, client_factory: Callable[[], Any] = _default_client) -> None:
        self._client_factory = client_factory

    def start(self, spec: SpawnSpec) -> Spawned:
        """Create this agent's service and return once its server proved it holds the
        agent's secret. Raises StartConflict (the module docstring says when) or
        RuntimeError (the task failed or never proved itself; what this start made
        is removed first)."""
        if spec.runtime not in IMAGE_RUNTIMES:
            raise RuntimeError(f"the agent image carries no {spec.runtime} runtime")
        client = self._client_factory()
        start_id = secrets.token_hex(6)
        network = agents_overlay(client)
        secret = self._create_secret(client, spec, start_id)
        try:
            body = service_body(spec, network=network, secret=secret, start_id=start_id)
            service_id = self._create_service(client, spec.name, body)
        except BaseException:
            _remove_secret(client, secret[0])
            raise
        try:
            endpoint = self._wait_endpoint(client, service_id, spec.name)
            wait_proven(
                AgentServerClient(endpoint=endpoint, secret=spec.secret, handle=service_id),
                spec.name,
                lambda: self._raise_if_ended(client, service_id, spec.name),
            )
        except BaseException:
            self._remove(client, service_id)
            raise
        logger.info("agent %s started as service %s at %s", spec.name, service_id[:12], endpoint)
        return Spawned(endpoint=endpoint, handle=service_id)

    @staticmethod
    def _create_secret(client: Any, spec: SpawnSpec, start_id: str) -> tuple[str, str]:
        name = secret_name(spec.name, start_id)
        data = json.dumps(spec.environment()).encode()
        created = client.api.create_secret(
            name, data, labels={LABEL: spec.name, START_LABEL: start_id}
        )
        return str(created["ID"]), name

    def _create_service(self, client: Any, agent_name: str, body: dict[str, Any]) -> str:
        """POST the body with the name as the claim; at most one stale holder (the
        module docstring's rule) is removed and the create retried once."""
        import docker.errors

        name = body["Name"]
        # What a holder this start cannot inspect is: through the docker proxy, a
        # service that is not an agent's reads as missing.
        state = "not an agent's"
        for attempt in range(2):
            try:
                return str(_post_service(client, body)["ID"])
            except docker.errors.APIError as exc:
                if exc.status_code != CONFLICT:
                    raise
            holder = _service(client, name)
            if holder is None:
                continue  # the holder went away meanwhile: claim the name again
            found = service_state(client, holder)
            state = found.value
            labels = holder["Spec"].get("Labels") or {}
            if attempt == 0 and labels.get(LABEL) == agent_name and found.stale:
                logger.info("agent %s: removing its %s service %s", agent_name, state, name)
                self._remove(client, holder["ID"])
                continue
            break
        raise StartConflict(
            f"service {name!r} already exists ({state}) and this start did not create it; "
            f"it is left alone (if nothing serves from it: docker service rm {name})"
        )

    def _wait_endpoint(self, client: Any, service_id: str, agent_name: str) -> str:
        """Where the platform reaches the service's server once its task runs."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            self._raise_if_ended(client, service_id, agent_name)
            if settings.TRINITY_SWARM_ENDPOINT != "published":
                holder = _service(client, service_id)
                if holder is not None:
                    return f"http://{holder['Spec']['Name']}:{CONTAINER_PORT}"
            else:
                address = service_state(client, _service(client, service_id)).published
                if address:
                    return f"http://{address}"
            time.sleep(0.5)
        waiting = service_state(client, _service(client, service_id)).error
        raise RuntimeError(
            f"the service of agent {agent_name!r} did not start in time"
            + (f": {redact(waiting)[:300]}" if waiting else "")
        )

    @staticmethod
    def _raise_if_ended(client: Any, service_id: str, agent_name: str) -> None:
        """A task that ended before its server proved itself will not: say so now,
        with the engine's reason (redacted)."""
        found = service_state(client, _service(client, service_id))
        if found.stale:
            reason = redact(found.error or found.value)[:300]
            raise RuntimeError(f"the task of agent {agent_name!r} ended before serving: {reason}")

    def stop(self, *, name: str, handle: str) -> None:
        """Remove the service ``handle`` names and the secret it held; what is gone
        already is not an error."""
        self._remove(self._client_factory(), handle)

    @staticmethod
    def _remove(client: Any, service_id: str) -> None:
        import docker.errors

        holder = _service(client, service_id)
        if holder is None:
            return
        held = holder["Spec"]["TaskTemplate"]["ContainerSpec"].get("Secrets") or []
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_service(holder["ID"])
        for secret in held:
            _remove_secret(client, secret["SecretID"])

    def is_alive(self, *, name: str, handle: str) -> bool:
        """Its task runs on a node that is up."""
        client = self._client_factory()
        return service_state(client, _service(client, handle)).state is ServiceState.RUNNING

    def forget_credentials(self, *, name: str) -> None:
        """Nothing outside the service: its secret goes with it (stop, discard)."""

    def discard(self, *, name: str) -> None:
        """Remove every service and secret labelled as this agent's."""
        client = self._client_factory()
        for holder in client.api.services(filters={"label": f"{LABEL}={name}"}):
            self._remove(client, holder["ID"])
            logger.info("agent %s: service %s removed", name, holder["ID"][:12])
        for secret in client.api.secrets(filters={"label": f"{LABEL}={name}"}):
            _remove_secret(client, secret["ID"])


def _post_service(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    """The create, as the Engine API reads it: the body is sent as it is."""
    api = client.api
    response = api._post_json(api._url("/services/create"), data=body)  # noqa: SLF001
    return dict(api._result(response, json=True))  # noqa: SLF001


def _service(client: Any, name_or_id: str) -> dict[str, Any] | None:
    import docker.errors

    try:
        return dict(client.api.inspect_service(name_or_id))
    except docker.errors.NotFound:
        return None


def _remove_secret(client: Any, secret_id: str) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):
        client.api.remove_secret(secret_id)


__all__ = ["SwarmRuntime", "agents_overlay"]
