"""A filtering proxy in front of the Docker engine's socket: agents' objects only.

Web and worker start, inspect, stop and remove agents' servers: containers
(agents/runtimes/docker.py) or, on a swarm manager, services with their secrets
(agents/runtimes/swarm.py), through the docker SDK. Whoever holds the engine's
socket is root on the host (on a manager, on every node), so neither holds it: they
speak the Docker API to this proxy over an internal network, and this proxy, the only
process with the socket, forwards a request only when it is one a runtime makes, on
an object that is an agent's, and only as it read it: it reads every request as the
engine would (JSON keys matched case-insensitively, paths decoded, queries parsed the
Go way) or refuses it, and sends the engine a request it builds itself from what it
read, never the client's bytes (docs/flows/docker-proxy.md):

- ``GET|HEAD /_ping``, ``GET /version``: the SDK's handshake;
- ``POST /containers/create?name=<prefix>...``: exactly the create the docker runtime
  sends (create.py): the agent image and label, the agents' network, every capability
  dropped but the agent server's few, no-new-privileges, a read-only root with its
  tmpfs and one anonymous work-area volume, memory, CPU and process limits; no other
  field, no duplicate key in any case, no unknown key;
- ``GET /containers/json``: only with a filter on the agent label;
- ``GET /containers/{id}/json``, ``POST /containers/{id}/start``, ``POST
  /containers/{id}/stop``, ``DELETE /containers/{id}``: only when the engine says the
  container carries the agent label (checked first, then the action is sent to the
  full id the check returned), with no body;
- ``POST /services/create``: exactly the service the swarm runtime sends (service.py:
  the container's hardening in the swarm's words, one replica, restart policy none,
  the agents' overlay only, the agent's own secret as its root-only file), whose
  secret the engine says is its agent's (owner.py);
- ``POST /secrets/create`` of an agent's name and labels (secret.py); ``GET
  /networks`` naming the agents' network (the answer cut to it) and ``POST
  /networks/create`` of that overlay as the runtime makes it (network.py);
- ``GET /services`` and ``GET /secrets`` filtered on the agent label; ``GET
  /services/{id}``, ``DELETE /services/{id}``, ``DELETE /secrets/{id}`` of an agent's
  (checked first, like a container); ``GET /tasks`` of one agent's service; ``GET
  /nodes/{id}`` (read only: a task's node's state and address).

Everything else (exec, logs, images, volumes, builds, service updates, the swarm's
own inspect and its join tokens, configs, node changes, any other container, service
or secret, an API version below 1.40) is refused and logged as method, path and
reason; a body is never logged (a create's environment and a secret's data carry the
agent's secrets). Standard library only, so the proxy runs from the backend image with
nothing else installed: ``python -m docker_proxy`` from ``deploy/``.
"""

from __future__ import annotations

from .policy import Policy, Refused
from .server import serve

__all__ = ["Policy", "Refused", "serve"]
