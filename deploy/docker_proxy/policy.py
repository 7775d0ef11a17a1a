"""What the proxy lets through: the agent's shape, and how a refusal reads.

The shape is the one container create agents/runtimes/docker.py makes (its
CAPABILITIES, GUARD_CAPABILITIES, SECURITY_OPT, TMPFS and WORK_AREA are these values,
and tests/deploy/test_docker_proxy.py pins that the runtime's own create passes) and
the one service create agents/runtimes/swarm_spec.py makes (the same, plus the
secret's file and the server's port; tests/deploy/test_docker_proxy_service_body.py
pins that its body passes).
"""

from __future__ import annotations

from dataclasses import dataclass

# The capabilities an agent server may keep (root in its container, spawning the CLI
# as its unprivileged user); the runtime's docstring says what each is for.
AGENT_CAPABILITIES = frozenset({"CHOWN", "DAC_OVERRIDE", "KILL", "SETGID", "SETUID"})
NO_NEW_PRIVILEGES = "no-new-privileges:true"
# The writable places on an agent's read-only root: tmpfs mounts, and one anonymous
# volume (no source, no driver options) for the work area.
AGENT_TMPFS = frozenset({"/tmp", "/home/agent/work"})  # noqa: S108 - paths in the container
AGENT_WORK_AREA = "/srv/trinity-agent"
# An agent's server (container or swarm service) also holds NET_ADMIN (for its egress
# rules) and SETPCAP (to drop capabilities from its bounding set) until its egress
# guard is in place, and drops both before it serves. A swarm agent reads its
# environment from one root-only secret file, and listens on one port.
GUARD_CAPABILITIES = frozenset({"NET_ADMIN", "SETPCAP"})
AGENT_SECRET_FILE = "trinity-agent-env"  # noqa: S105 - a file name
AGENT_PORT = 8080
# The oldest API version the proxy forwards. Older versions are read differently by
# the engine: below 1.24 a start's body is a host config (binds, privileges) applied
# to the container, below 1.25 AutoRemove is ignored, and so on; the runtime's SDK
# speaks the engine's own version.
MIN_API_VERSION = (1, 40)
MAX_BODY = 1024 * 1024


@dataclass(frozen=True)
class Policy:
    """The agent image, the agents' network (a bridge network's name for the docker
    runtime, an overlay's for the swarm runtime), the label every agent container,
    service and secret carries and the prefix of their names."""

    image: str
    network: str
    label: str = "trinity.agent"
    name_prefix: str = "trinity-agent-"

    @property
    def label_prefix(self) -> str:
        """The namespace of the labels an agent's object may carry (``trinity.``)."""
        return self.label.rsplit(".", 1)[0] + "."

    @property
    def network_labels(self) -> dict[str, str]:
        """The labels of the agents' overlay network when the swarm runtime makes it."""
        return {f"{self.label_prefix}network": "agents"}


class Refused(Exception):
    """A request the proxy does not forward: ``status`` is 400 for a request it cannot
    read as the engine would, 403 for one it reads and does not allow, 404 for a
    container, service or secret that is not an agent's. ``reason`` never quotes a
    value of the request (a create's environment and a secret's data carry the agent's
    secret), only names, via ``shown``."""

    def __init__(self, reason: str, status: int = 403) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


def shown(name: str, limit: int = 60) -> str:
    """A client-chosen name (a key, a parameter, a path) fit for a reason and a log line:
    quoted, escaped (no control character can start a line) and cut short."""
    return ascii(name[:limit]) + ("..." if len(name) > limit else "")
