"""What the proxy sends the engine for a call target.py read: each route's rule.

A call with a body (a create) is forwarded with the body its reader rebuilt; any
other carries no body. A call on an object (a container, a service, a secret) goes to
the full id of the object the engine says is an agent's (owner.py); a list carries
the filters that make it the agents' (queries.py); a network lookup's answer is cut to
the agents' network (network.py). Everything is built from what was read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .create import create_reader
from .engine import EngineAnswer
from .fields import Reader
from .gojson import read_json
from .network import network_filters, network_names, network_reader, only_the_agents_network
from .owner import CONTAINER, SECRET, SERVICE, Kind, agent_id, check_secrets
from .policy import Policy, Refused
from .queries import (
    container_query,
    create_query,
    label_list_query,
    list_query,
    network_list_query,
    task_query,
    task_service,
)
from .secret import secret_reader
from .service import service_reader
from .target import Call


def _as_is(answer: EngineAnswer) -> EngineAnswer:
    return answer


@dataclass(frozen=True)
class Forward:
    """The request the proxy sends the engine, and what of the answer it relays."""

    target: str
    body: bytes | None = None
    answer: Callable[[EngineAnswer], EngineAnswer] = field(default=_as_is)


def _encoded(rebuilt: Any) -> bytes:
    return json.dumps(rebuilt).encode()


class Decide:
    """``Decide(policy, engine)(call, body)``: the Forward for a read call and its
    body; raises Refused for one the policy does not let through."""

    def __init__(self, policy: Policy, engine: str) -> None:
        self.policy = policy
        self.engine = engine
        # route: (the body's name in a refusal's reason, its reader)
        self._readers: dict[str, tuple[str, Reader]] = {
            "create": ("create", create_reader(policy)),
            "network_create": ("network", network_reader(policy)),
            "secret_create": ("secret", secret_reader(policy)),
            "service_create": (
                "service",
                service_reader(policy, lambda: network_names(engine, policy)),
            ),
        }
        self._rules: dict[str, Callable[[Call], Forward]] = {
            "ping": self._plain,
            "version": self._plain,
            "list": self._container_list,
            "inspect": self._container,
            "start": self._container,
            "stop": self._container,
            "remove": self._container,
            "network_list": self._network_list,
            "secret_list": self._label_list,
            "secret_remove": self._owned(SECRET),
            "service_list": self._label_list,
            "service_inspect": self._owned(SERVICE),
            "service_remove": self._owned(SERVICE),
            "task_list": self._task_list,
            "node_inspect": self._plain,  # read only: a task's node's state and address
        }

    @property
    def routes(self) -> frozenset[str]:
        """The routes this decides (every one target.py reads, tests pin)."""
        return frozenset(self._readers) | frozenset(self._rules)

    def __call__(self, call: Call, body: bytes) -> Forward:
        if call.route in self._readers:
            where, reader = self._readers[call.route]
            return self._create(call, reader(read_json(body), where))
        if body:
            raise Refused("this call carries no body (an old API reads a start's as a host config)")
        if call.route not in self._rules:
            raise Refused("not an agent runtime call")
        return self._rules[call.route](call)

    def _create(self, call: Call, rebuilt: dict[str, Any]) -> Forward:
        if call.route == "create":
            query = create_query(self.policy, call.query)
            return Forward(call.with_query(query).target(), _encoded(rebuilt))
        if call.route == "service_create":
            check_secrets(self.engine, self.policy, rebuilt)
        return Forward(call.with_query({}).target(), _encoded(rebuilt))

    @staticmethod
    def _plain(call: Call) -> Forward:
        return Forward(call.with_query({}).target())

    def _container_list(self, call: Call) -> Forward:
        return Forward(call.with_query(list_query(self.policy, call.query)).target())

    def _container(self, call: Call) -> Forward:
        assert call.ref is not None  # every container route names one
        container_id = agent_id(self.engine, CONTAINER, call.ref, self.policy)
        query = container_query(call.route, call.query)
        return Forward(call.with_query(query, ref=container_id).target())

    def _network_list(self, call: Call) -> Forward:
        network_list_query(self.policy, call.query)
        query = {"filters": network_filters(self.policy)}
        return Forward(
            call.with_query(query).target(),
            answer=lambda answer: only_the_agents_network(self.policy, answer),
        )

    def _label_list(self, call: Call) -> Forward:
        return Forward(call.with_query(label_list_query(self.policy, call.query)).target())

    def _owned(self, kind: Kind) -> Callable[[Call], Forward]:
        def rule(call: Call) -> Forward:
            assert call.ref is not None  # every such route names one
            object_id = agent_id(self.engine, kind, call.ref, self.policy)
            return Forward(call.with_query({}, ref=object_id).target())

        return rule

    def _task_list(self, call: Call) -> Forward:
        service_id = agent_id(self.engine, SERVICE, task_service(call.query), self.policy)
        return Forward(call.with_query(task_query(service_id)).target())
