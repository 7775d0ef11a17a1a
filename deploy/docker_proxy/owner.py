"""Which engine objects are an agent's: the engine, asked by the proxy, says the
object carries the agent label. An action then goes to the full id the engine
returned, so a name cannot be moved to another object in between.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .engine import engine_read
from .policy import Policy, Refused
from .service import SWARM_ID


@dataclass(frozen=True)
class Kind:
    """Where an object of one kind is inspected and where its inspect names its labels
    and its id."""

    noun: str
    inspect: str  # the inspect path, ``{}`` for the reference
    holder: str  # the inspect's object that holds the labels
    id_key: str
    id_pattern: re.Pattern[str]


CONTAINER = Kind("container", "/containers/{}/json", "Config", "Id", re.compile(r"[0-9a-f]{64}"))
SERVICE = Kind("service", "/services/{}", "Spec", "ID", SWARM_ID)
SECRET = Kind("secret", "/secrets/{}", "Spec", "ID", SWARM_ID)


def agent_object(engine: str, kind: Kind, ref: str, policy: Policy) -> dict[str, Any]:
    """The engine's inspect of ``ref`` when it carries the agent label; raises
    Refused (404) otherwise. ``ref`` is a reference target.py read (no ``/``)."""
    attrs = engine_read(engine, kind.inspect.format(ref))
    if isinstance(attrs, dict):
        labels = (attrs.get(kind.holder) or {}).get("Labels") or {}
        if policy.label in labels and kind.id_pattern.fullmatch(str(attrs.get(kind.id_key))):
            return attrs
    raise Refused(f"no such agent {kind.noun}", 404)


def agent_id(engine: str, kind: Kind, ref: str, policy: Policy) -> str:
    """The full id of agent object ``ref`` (``agent_object``)."""
    return str(agent_object(engine, kind, ref, policy)[kind.id_key])


def check_secrets(engine: str, policy: Policy, service: dict[str, Any]) -> None:
    """Each secret a service create (as service.py rebuilt it) mounts is, the engine
    says, a secret of the service's own agent under the name the create gives it;
    raises Refused (403) otherwise."""
    agent = service["Labels"][policy.label]
    for index, ref in enumerate(service["TaskTemplate"]["ContainerSpec"].get("Secrets", [])):
        where = f"service.TaskTemplate.ContainerSpec.Secrets[{index}]"
        try:
            spec = agent_object(engine, SECRET, ref["SecretID"], policy)["Spec"]
        except Refused:
            raise Refused(f"{where} is not an agent's secret") from None
        if spec["Labels"][policy.label] != agent or spec.get("Name") != ref["SecretName"]:
            raise Refused(f"{where} is not this agent's secret under its name")
