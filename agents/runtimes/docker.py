"""Agent servers as docker containers (production), through the docker SDK.

The container's environment is fixed at create time, so anything that changes the
baseline credential (a mode change, a reload fallback) recreates the container.

The container name (``trinity-agent-<agent>``) is the exclusive claim on an agent's
server: the engine refuses a second container with a taken name (409 Conflict), so
of two racing starts exactly one creates a container. Every container carries the
agent's name and the id of the start that created it as labels. A start removes
only what it created itself, plus one kind of leftover, by an explicit rule:
a container with this agent's label whose state is ``exited`` or ``dead``. Such a
container serves nothing and never comes back by itself: the restart policy is
``no``, so a server that crashed, was killed or was stopped stays down, and the
platform revives it (the next turn's start, or the supervisor task) with the
credentials the agent should have *now*; an engine restart of the old container
would boot it on its create-time environment, from before any hot-reload. Anything
else that holds the name (live, restarting, or unlabelled) is left alone and the
start fails with StartConflict.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings

from agents.client import AgentServerClient, AgentServerUnavailable, EndpointUnproven
from agents.runtimes.base import Spawned, SpawnSpec, StartConflict
from trinity_contract.redaction import redact

logger = logging.getLogger(__name__)

CONTAINER_PORT = 8080
# The agent runtimes the agent image (deploy/Dockerfile.agent) carries: the Claude CLI,
# the Messages API and the Codex CLI (each CLI pinned and staged for the agent user).
IMAGE_RUNTIMES = frozenset({"claude-code", "anthropic-api", "codex-cli"})
STARTUP_TIMEOUT = 60.0
LABEL = "trinity.agent"
START_LABEL = "trinity.start"
# Container states that serve nothing and never come back by themselves.
STALE_STATES = frozenset({"exited", "dead"})
CONFLICT = 409


NETWORK_LABEL = "trinity.network"

# The container's hardening, which deploy/docker_proxy requires of every create (a
# create without it is refused there). The agent server runs as root in the container
# and spawns the CLI as the image's unprivileged user; of root's capabilities it keeps
# only what that takes, found by running turns with fewer: SETUID and SETGID (the
# switch to the agent user, its groups cleared), CHOWN (the work area and each spawn's
# HOME are handed to that user), KILL (a turn's processes, another user's, die with
# it), DAC_OVERRIDE (the spawn HOMEs the agent user made private are removed after
# the turn). The CLI and its tools, as that user, hold none; no-new-privileges keeps a
# setuid binary from giving any back. No seccomp option: the engine's default profile.
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "KILL", "SETGID", "SETUID")
SECURITY_OPT = "no-new-privileges:true"
# The egress guard (agent_server/egress.py, docs/flows/egress-guard.md): the server
# starts with two more capabilities, NET_ADMIN for iptables rules in the container's
# own network namespace that refuse the agent user every private address (the other
# agents on this network, the host's bridge address) and SETPCAP to drop both from
# its bounding set, which it does, with the rules checked, before it serves.
GUARD_CAPABILITIES = ("NET_ADMIN", "SETPCAP")
# The root file system is read-only; these are the writable places. The work area (the
# CLI's working directory and HOMEs, the image's TRINITY_AGENT_WORK_AREA) is an
# anonymous volume, on disk, removed with the container; the server's own directory
# (TRINITY_AGENT_HOME) and /tmp are tmpfs, paid from the memory limit, so each has a size.
WORK_AREA = "/srv/trinity-agent"
SERVER_HOME = "/home/agent/work"
TMPFS = {
    "/tmp": "rw,exec,nosuid,nodev,size=256m,mode=1777",  # noqa: S108 - the container's own
    SERVER_HOME: "rw,noexec,nosuid,nodev,size=16m,mode=0700",
}


def guard_env() -> dict[str, str]:
    """The server's variables that ask for the egress guard, with the private
    destinations the operator allows through it (TRINITY_AGENT_EGRESS_ALLOW)."""
    env = {"TRINITY_AGENT_EGRESS_GUARD": "1"}
    if settings.TRINITY_AGENT_EGRESS_ALLOW:
        env["TRINITY_AGENT_EGRESS_ALLOW"] = settings.TRINITY_AGENT_EGRESS_ALLOW
    return env


def _default_client() -> Any:
    import docker

    return docker.from_env()


def agents_network(client: Any) -> str:
    """The agents' network (TRINITY_DOCKER_NETWORK) for a container to join: created
    when missing and TRINITY_DOCKER_NETWORK_CREATE allows it, else taken as it is
    (compose creates it, and the socket proxy answers no network call).

    Two first starts may race to create it, and the engine keeps names unique only
    best-effort: of several networks of that name the oldest is the one, by id.
    """
    import docker.errors

    name = settings.TRINITY_DOCKER_NETWORK
    if not settings.TRINITY_DOCKER_NETWORK_CREATE:
        return str(name)
    found = [n for n in client.networks.list(names=[name]) if n.name == name]
    if not found:
        try:
            client.networks.create(
                name,
                driver="bridge",
                internal=settings.TRINITY_DOCKER_NETWORK_INTERNAL,
                labels={NETWORK_LABEL: "agents"},
                check_duplicate=True,
            )
        except docker.errors.APIError as exc:
            if exc.status_code != CONFLICT:
                raise
        found = [n for n in client.networks.list(names=[name]) if n.name == name]
    if not found:
        raise RuntimeError(f"the agents' network {name!r} could not be created")
    oldest = min(found, key=lambda n: (n.attrs.get("Created", ""), n.id))
    return str(oldest.id)


def _raise_if_exited(container: Any, agent_name: str) -> None:
    """A container that exited before its server proved itself will not: say so now,
    with its exit code and last log line (redacted), instead of at the timeout."""
    container.reload()
    if container.status not in STALE_STATES:
        return
    import docker.errors

    code = container.attrs.get("State", {}).get("ExitCode")
    try:
        lines = container.logs(tail=5).decode(errors="replace").strip().splitlines()
    except docker.errors.APIError:
        # Under compose the socket proxy forwards no log call.
        lines = ["its log is not readable here (docker logs on the host shows it)"]
    last = redact(lines[-1])[:300] if lines else "no output"
    raise RuntimeError(
        f"agent container for {agent_name!r} exited (code {code}) before its server came up: {last}"
    )


def wait_proven(client: AgentServerClient, agent_name: str, fail_fast: Callable[[], None]) -> None:
    """Poll ``client.prove`` until it succeeds; raises RuntimeError naming the
    endpoint on a wrong proof (at once), when ``fail_fast`` raises between polls (the
    container or task ended first) or after STARTUP_TIMEOUT."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        try:
            client.prove(timeout=2.0)
            return
        except EndpointUnproven as exc:
            raise RuntimeError(f"agent server for {agent_name!r}: {exc}") from None
        except AgentServerUnavailable:
            fail_fast()
            time.sleep(0.5)  # the server binds a moment after the container starts
    raise RuntimeError(
        f"agent server for {agent_name!r} did not prove itself on {client.endpoint} in time"
    )


class DockerRuntime:
    name = "docker"
    contained = True  # one agent per container

    def __init__(self, client_factory: Callable[[], Any] = _default_client) -> None:
        self._client_factory = client_factory

    def container_name(self, agent_name: str) -> str:
        return f"trinity-agent-{agent_name}"

    def start(self, spec: SpawnSpec) -> Spawned:
        """Create and start this agent's container on the agents' network; return once
        its server proved it holds the agent's secret (agents/client.py ``prove``).

        Raises StartConflict when another container holds the name (see the module
        docstring for the one leftover that is removed instead), RuntimeError when
        the server does not come up or something else answers on the endpoint without
        the proof (naming the endpoint; the container is removed first).
        """
        if spec.runtime not in IMAGE_RUNTIMES:
            raise RuntimeError(
                f"the agent image carries no {spec.runtime} runtime yet: run this agent "
                "with the local backend (TRINITY_AGENT_BACKEND=local)"
            )
        client = self._client_factory()
        start_id = secrets.token_hex(8)
        run_kwargs = self._run_kwargs(spec, agents_network(client), start_id)
        container = self._create(client, spec.name, start_id, run_kwargs)
        try:
            container.reload()
            endpoint = self._endpoint(container)
            wait_proven(
                AgentServerClient(endpoint=endpoint, secret=spec.secret, handle=str(container.id)),
                spec.name,
                lambda: _raise_if_exited(container, spec.name),
            )
        except BaseException:
            # Ours by construction (this start created it): nothing else may serve
            # from a container that never came up.
            with contextlib.suppress(Exception):
                container.remove(force=True, v=True)
            raise
        logger.info(
            "agent %s started in container %s at %s", spec.name, container.short_id, endpoint
        )
        return Spawned(endpoint=endpoint, handle=str(container.id))

    def _run_kwargs(self, spec: SpawnSpec, network: str, start_id: str) -> dict[str, Any]:
        """``containers.run``'s arguments: the image, the baseline environment, the
        labels that make the container this start's, the restart policy, the limits
        from settings (memory, CPU, processes) and the hardening (capabilities,
        no-new-privileges, a read-only root with the writable places above, the
        egress guard)."""
        from docker.types import Mount

        return {
            "image": settings.TRINITY_AGENT_IMAGE,
            "name": self.container_name(spec.name),
            "command": [
                "python",
                "-m",
                "agent_server",
                "--host",
                "0.0.0.0",  # noqa: S104 - inside the container, on the agents' network only
                "--port",
                str(CONTAINER_PORT),
            ],
            "environment": {
                **spec.environment(),
                "TRINITY_AGENT_HOME": SERVER_HOME,
                **guard_env(),
            },
            "detach": True,
            "labels": {LABEL: spec.name, START_LABEL: start_id},
            # The platform revives a dead server (the module docstring says why).
            "restart_policy": {"Name": "no"},
            "network": network,
            "mem_limit": settings.TRINITY_AGENT_MEMORY_LIMIT,
            "nano_cpus": settings.TRINITY_AGENT_CPU_MILLICORES * 1_000_000,
            "pids_limit": settings.TRINITY_AGENT_PIDS_LIMIT,
            "cap_drop": ["ALL"],
            "cap_add": [*CAPABILITIES, *GUARD_CAPABILITIES],
            "security_opt": [SECURITY_OPT],
            "read_only": True,
            "tmpfs": dict(TMPFS),
            "mounts": [Mount(target=WORK_AREA, source=None, type="volume")],
        }

    @staticmethod
    def _endpoint(container: Any) -> str:
        """Where the platform reaches the container's server: its name (the platform
        is a container on the same network, whose DNS knows it) or its address there."""
        if settings.TRINITY_DOCKER_ENDPOINT == "name":
            return f"http://{container.name}:{CONTAINER_PORT}"
        networks = container.attrs["NetworkSettings"]["Networks"]
        address = networks[settings.TRINITY_DOCKER_NETWORK]["IPAddress"]
        return f"http://{address}:{CONTAINER_PORT}"

    def _create(
        self, client: Any, agent_name: str, start_id: str, run_kwargs: dict[str, Any]
    ) -> Any:
        """``containers.run`` with the name as the claim; at most one stale leftover
        is removed and the create retried once."""
        import docker.errors

        name = run_kwargs["name"]
        status = "gone"
        for attempt in range(2):
            try:
                return client.containers.run(**run_kwargs)
            except docker.errors.APIError as exc:
                if exc.status_code != CONFLICT:
                    self._remove_own_leftover(client, name, start_id)
                    raise
            try:
                holder = client.containers.get(name)
            except docker.errors.NotFound:
                continue  # the holder went away meanwhile: claim the name again
            labels = holder.labels or {}
            status = holder.status
            if attempt == 0 and labels.get(LABEL) == agent_name and status in STALE_STATES:
                logger.info("agent %s: removing stale %s container %s", agent_name, status, name)
                try:
                    # Without force: should it have come back to life meanwhile, the
                    # engine refuses, and the retry below reports the conflict.
                    holder.remove(v=True)
                except docker.errors.NotFound:
                    pass
                except docker.errors.APIError as exc:
                    if exc.status_code != CONFLICT:
                        raise
                continue
            break
        raise StartConflict(
            f"container {name!r} already exists ({status}) and this start did not create "
            f"it; it is left alone (if nothing serves from it, remove it: docker rm -f {name})"
        )

    @staticmethod
    def _remove_own_leftover(client: Any, name: str, start_id: str) -> None:
        """A run that created the container but failed to start it leaves it behind;
        remove it only if this start's label proves it is ours."""
        import docker.errors

        try:
            container = client.containers.get(name)
        except docker.errors.NotFound:
            return
        if (container.labels or {}).get(START_LABEL) == start_id:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True, v=True)

    def stop(self, *, name: str, handle: str) -> None:
        """Stop and remove the container ``handle`` names (its id: the one recorded
        for the agent), with its anonymous volumes, so its files go with it."""
        import docker.errors

        client = self._client_factory()
        try:
            container = client.containers.get(handle)
        except docker.errors.NotFound:
            return
        container.stop(timeout=10)
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True, v=True)

    def is_alive(self, *, name: str, handle: str) -> bool:
        import docker.errors

        try:
            container = self._client_factory().containers.get(handle)
        except docker.errors.NotFound:
            return False
        return bool(container.status == "running")

    def forget_credentials(self, *, name: str) -> None:
        """Nothing on the host: a container's token file lives in the container, which
        is removed on stop and replaced whenever its baseline credential changes."""

    def discard(self, *, name: str) -> None:
        """Remove every container labelled as this agent's, with its volumes: the
        agent is deleted, so whatever it left goes, running or not."""
        client = self._client_factory()
        import docker.errors

        for container in client.containers.list(all=True, filters={"label": f"{LABEL}={name}"}):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True, v=True)
            logger.info("agent %s: container %s removed", name, container.short_id)
