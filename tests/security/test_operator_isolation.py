"""Between operators: two operators and an admin, each with agents, turns,
notifications, refusal events, usage, schedules, budgets and gateway keys (with
their usage and an open request). Every read endpoint of
the API (enumerated from the OpenAPI schema, so a new endpoint is walked too) is read
as each operator, and nothing of the other's (or the admin's) appears: no agent name,
no turn id, no schedule, notice or refusal, no count derived from them.

The pool is shared (admin-managed, every agent may be served by every plan), so the
plans' names and headroom are everyone's to see; whose agents, turns and refusals
they carry is not. A deleted agent's history is not inherited by a new agent that
reuses its name.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from itertools import product
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from agents.models import Agent
from execution.models import Execution, Schedule
from execution.schedules.services import schedule_create
from gateway.models import GatewayKey
from gateway.open_streams import OpenStream
from subscriptions.key_spend import key_spend_reserve
from subscriptions.models import Subscription
from subscriptions.services import record_rate_limit_event
from tests.agents.factories import AgentFactory, UserFactory
from tests.gateway.factories import GatewayUsageFactory, open_streams_publish
from tests.subscriptions.factories import SubscriptionFactory
from trinity import clock
from trinity.crypto import Secret
from trinity.models import NotificationChannel
from trinity.notifications import notification_send
from trinity.selectors import system_settings_get

pytestmark = pytest.mark.django_db

OPERATORS = ("alpha", "bravo")


@dataclass
class Holdings:
    """What one user owns, and the strings that would betray it in a response."""

    user: User
    agents: list[Agent] = field(default_factory=list)
    executions: list[Execution] = field(default_factory=list)
    schedules: list[Schedule] = field(default_factory=list)
    # Every trace of what they own (none may reach another operator), and the ones
    # the API shows its owner (so the walk is known to read real answers).
    markers: set[str] = field(default_factory=set)
    shown: set[str] = field(default_factory=set)

    @property
    def turns(self) -> int:
        return len(self.executions)


def _client(user: User) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def _agent_with_history(owner: User, name: str, plan: Subscription, holdings: Holdings) -> Agent:
    """An agent on ``plan`` with one served turn, one refusal, one notice, a schedule
    and a key budget with spend on it; every trace of it is a marker."""
    now = clock.now()
    agent: Agent = AgentFactory.create(
        name=name, owner=owner, subscription=plan, key_budget_daily_usd=Decimal("3.00")
    )
    execution = Execution.objects.create(
        agent=agent,
        agent_name=name,
        message=f"message-of-{name}",
        response=f"answer-of-{name}",
        status="succeeded",
        served_by_kind="subscription",
        served_by_subscription=plan,
        input_tokens=100,
        output_tokens=10,
        cost_usd=Decimal("0.25"),
        created_at=now - timedelta(hours=1),
    )
    record_rate_limit_event(
        agent_name=name,
        agent_id=agent.pk,
        subscription_id=plan.pk,
        error_message=f"refusal-of-{name}",
        failure_kind="rate_limit",
        now=now - timedelta(minutes=30),
    )
    notification_send(
        kind="subscription_switched",
        title=f"notice-of-{name}",
        body=f"Agent {name!r} moved",
        agent_name=name,
        agent_id=agent.pk,
        subscription_id=plan.pk,
        now=now,
    )
    schedule = schedule_create(
        agent=agent, name=f"nightly-{name}", cron="0 3 * * *", message=f"cron-of-{name}", now=now
    )
    key_spend_reserve(agent=agent, system=system_settings_get(), usd=Decimal("0.50"), now=now)
    holdings.agents.append(agent)
    holdings.executions.append(execution)
    holdings.schedules.append(schedule)
    holdings.markers |= {
        name,
        str(execution.pk),
        f"message-of-{name}",
        f"answer-of-{name}",
        f"refusal-of-{name}",
        f"notice-of-{name}",
        f"nightly-{name}",
        f"cron-of-{name}",
        f"agent:{agent.pk}",
    }
    holdings.shown |= {
        name,
        str(execution.pk),
        f"notice-of-{name}",
        f"nightly-{name}",
        f"cron-of-{name}",
        f"agent:{agent.pk}",
    }
    return agent


def _gateway_key_with_usage(owner: User, who: str, holdings: Holdings) -> None:
    """A gateway key with one request on the shared plan and, where the open requests
    live in Redis, one request open now; every trace of them is a marker."""
    usage = GatewayUsageFactory.create(
        key__owner=owner, key__name=f"gwkey-{who}", model=f"model-of-{who}"
    )
    holdings.markers |= {f"gwkey-{who}", f"model-of-{who}", f"stream-of-{who}"}
    holdings.shown |= {f"gwkey-{who}", f"model-of-{who}"}
    if settings.REDIS_URL:
        stream = OpenStream(
            request_id=f"stream-of-{who}",
            key_id=usage.key_id,
            owner_id=owner.pk,
            provider="anthropic",
            model="claude-sonnet-4-5",
            started_at=clock.now().isoformat(),
            served_by="plan-shared",
        )
        open_streams_publish([stream], process=f"gw-{who}")
        holdings.shown.add(f"stream-of-{who}")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Holdings]]:
    """alpha and bravo (operators) and an admin, on a pool of three plans: one each
    and one both use."""
    with override_settings(VAR_DIR=tmp_path):
        plans = {
            name: SubscriptionFactory.create(name=f"plan-{name}")
            for name in ("alpha", "bravo", "shared")
        }
        world = {
            "alpha": Holdings(UserFactory.create(username="alpha")),
            "bravo": Holdings(UserFactory.create(username="bravo")),
            "admin": Holdings(
                UserFactory.create(username="root", is_staff=True, is_superuser=True)
            ),
        }
        for who in OPERATORS:
            _agent_with_history(world[who].user, f"{who}-one", plans[who], world[who])
            _agent_with_history(world[who].user, f"{who}-two", plans["shared"], world[who])
        _agent_with_history(world["admin"].user, "admin-one", plans["shared"], world["admin"])
        for who, holdings in world.items():
            _gateway_key_with_usage(holdings.user, who, holdings)
        # The pool's own notice (a headroom alert names no agent): everyone's.
        notification_send(
            kind="headroom_alert",
            title="plan-shared: 5-hour window at 80.0%",
            subscription_id=plans["shared"].pk,
            now=clock.now(),
        )
        # An admin's channel (straight to the row: what a URL may be is not this test's).
        NotificationChannel.objects.create(
            name="ops-hook",
            kind="json",
            url=Secret("https://hooks.example.test/x"),
            url_host="hooks.example.test",
            created_at=clock.now(),
            updated_at=clock.now(),
        )
        yield world


# Enumerating the API


def _schema(admin: APIClient) -> dict[str, Any]:
    response = admin.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema: dict[str, Any] = response.json()
    return schema


def _path_values(path: str, parameter: str) -> list[str]:
    """Every value a path parameter can take in this world: everyone's, so a read of
    another owner's object is tried too (it must answer as if it did not exist)."""
    if parameter == "name":
        return list(Agent.objects.values_list("name", flat=True))
    if parameter == "schedule":
        return list(Schedule.objects.values_list("name", flat=True))
    if parameter == "id" and path.startswith("/api/executions/"):
        return [str(pk) for pk in Execution.objects.values_list("pk", flat=True)]
    if parameter == "id" and path.startswith("/api/subscriptions/"):
        return [str(pk) for pk in Subscription.objects.values_list("pk", flat=True)]
    if parameter == "id" and path.startswith("/api/notification-channels/"):
        return [str(pk) for pk in NotificationChannel.objects.values_list("pk", flat=True)]
    if parameter == "id" and path.startswith("/api/gateway/keys/"):
        return [str(pk) for pk in GatewayKey.objects.values_list("pk", flat=True)]
    raise AssertionError(
        f"{path}: no values for the path parameter {parameter!r}; teach this test what "
        "it names so the new endpoint is walked"
    )


def _query_values(operation: dict[str, Any]) -> list[dict[str, str]]:
    """Each query to send: none, then one per value of each enumerable parameter (and
    every agent name for an ``agent`` filter)."""
    queries: list[dict[str, str]] = [{}]
    for parameter in operation.get("parameters", []):
        if parameter.get("in") != "query":
            continue
        name = parameter["name"]
        values = parameter.get("schema", {}).get("enum") or []
        if name == "agent":
            values = list(Agent.objects.values_list("name", flat=True))
        queries += [{name: str(v)} for v in values if v is not None]
    return queries


def _read_urls(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, str]]]:
    for path, operations in schema["paths"].items():
        if "get" not in operations:
            continue
        names = re.findall(r"{(\w+)}", path)
        choices = [_path_values(path, n) for n in names]
        for values in product(*choices):
            url = path
            for name, value in zip(names, values, strict=True):
                url = url.replace("{" + name + "}", value)
            for query in _query_values(operations["get"]):
                yield url, query


def _body(response: Any) -> bytes:
    """The answer's bytes; a turn's event stream read to its end (every turn here is
    finished, so its stream closes by itself)."""
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return bytes(response.content)


def _walk(client: APIClient, schema: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """GET every read URL; the bodies by (url, query), each checked to be an answer."""
    bodies: dict[tuple[str, str], Any] = {}
    for url, query in _read_urls(schema):
        response = client.get(url, query)
        # Without Redis the open streams are the gateway's to say, and none runs here.
        unread = url == "/api/gateway/streams" and not settings.REDIS_URL
        assert response.status_code in ((503,) if unread else (200, 403, 404)), (
            url,
            query,
            response.status_code,
        )
        bodies[(url, str(sorted(query.items())))] = (
            _body(response).decode() if response.status_code == 200 else ""
        )
    return bodies


def test_the_walk_covers_every_read_endpoint_of_the_schema(world: dict[str, Holdings]) -> None:
    schema = _schema(_client(world["admin"].user))
    walked = {url for url, _ in _read_urls(schema)}
    templates = {path for path, ops in schema["paths"].items() if "get" in ops}
    # Every template was expanded at least once (a path parameter with no value would
    # leave it out silently).
    for template in templates:
        pattern = "^" + re.sub(r"{\w+}", "[^/]+", template) + "$"
        assert any(re.match(pattern, url) for url in walked), template
    assert len(templates) >= 20


@pytest.mark.parametrize("viewer", OPERATORS)
def test_an_operator_reads_nothing_of_another_operators_or_the_admins(
    world: dict[str, Holdings], viewer: str
) -> None:
    schema = _schema(_client(world["admin"].user))
    mine = world[viewer]
    others = [world[w] for w in world if w != viewer]
    forbidden = set().union(*(h.markers for h in others))

    bodies = _walk(_client(mine.user), schema)

    leaks = sorted(
        (marker, url, query)
        for (url, query), body in bodies.items()
        for marker in forbidden
        if marker in body
    )
    assert leaks == [], leaks[:10]
    # And the operator's own things are there: the walk is not reading empty answers.
    seen = "".join(bodies.values())
    for marker in mine.shown:
        assert marker in seen, marker


@pytest.mark.parametrize("viewer", OPERATORS)
def test_an_operators_counts_count_only_their_own(world: dict[str, Holdings], viewer: str) -> None:
    mine = world[viewer]
    client = _client(mine.user)

    subscriptions = client.get("/api/subscriptions").json()
    assert sum(s["agent_count"] for s in subscriptions) == len(mine.agents)
    assert {s["name"] for s in subscriptions} == {"plan-alpha", "plan-bravo", "plan-shared"}
    shared = next(s for s in subscriptions if s["name"] == "plan-shared")
    assert (shared["agent_count"], shared["agents"]) == (
        1,
        [{"name": f"{viewer}-two", "owner": viewer}],
    )

    pressure = client.get("/api/agents/subscription-pressure").json()["subscriptions"]
    assert sum(row["agent_count"] for row in pressure) == len(mine.agents)
    assert sum(row["failures_24h"] for row in pressure) == len(mine.agents)

    usage = client.get(f"/api/subscriptions/{shared['id']}/usage").json()
    assert usage["observed"]["seven_day"]["turns"] == 1
    assert [(a["name"], a["owner"]) for a in usage["observed"]["per_agent"]] == [
        (f"{viewer}-two", viewer)
    ]
    assert sum(usage["failures_24h"].values()) == 1

    report = client.get("/api/reports/usage", {"group": "agent"}).json()
    assert report["totals"]["turns"] == mine.turns
    assert report["totals"]["refusals"] == len(mine.agents)
    assert sorted(row["group"] for row in report["rows"]) == sorted(a.name for a in mine.agents)

    notices = client.get("/api/notifications").json()["results"]
    assert sorted(n["title"] for n in notices) == sorted(
        [f"notice-of-{a.name}" for a in mine.agents] + ["plan-shared: 5-hour window at 80.0%"]
    )
    assert len(client.get("/api/executions").json()["results"]) == mine.turns
    budgets = client.get("/api/budgets").json()
    assert {b["agent"] for b in budgets if b["scope"] != "fleet"} == {a.name for a in mine.agents}


def test_the_admin_sees_everyones(world: dict[str, Holdings]) -> None:
    client = _client(world["admin"].user)
    subscriptions = client.get("/api/subscriptions").json()
    assert sum(s["agent_count"] for s in subscriptions) == 5
    report = client.get("/api/reports/usage", {"group": "agent"}).json()
    assert report["totals"]["turns"] == 5
    assert report["totals"]["refusals"] == 5
    assert len(client.get("/api/notifications").json()["results"]) == 6


@pytest.mark.parametrize("new_owner", ["alpha", "bravo"])
def test_a_new_agent_that_reuses_a_deleted_ones_name_starts_clean(
    world: dict[str, Holdings], new_owner: str
) -> None:
    """alpha deletes an agent with history; a new agent of the same name (alpha's own
    again, or bravo's) shows none of it to its owner."""
    alpha = world["alpha"]
    plan = Subscription.objects.get(name="plan-shared")
    old = _agent_with_history(alpha.user, "reused", plan, Holdings(alpha.user))
    old_turn = str(Execution.objects.get(agent=old).pk)
    deleted = _client(alpha.user).delete("/api/agents/reused")
    assert deleted.status_code == 204, deleted.content

    owner = world[new_owner].user
    client = _client(owner)
    created = client.post("/api/agents", {"name": "reused", "auto_assign": False}, format="json")
    assert created.status_code == 201, created.content

    assert client.get("/api/notifications", {"agent": "reused"}).json()["results"] == []
    assert all(
        "notice-of-reused" not in n["title"]
        for n in client.get("/api/notifications").json()["results"]
    )
    assert client.get("/api/executions", {"agent": "reused"}).json()["results"] == []
    assert client.get(f"/api/executions/{old_turn}").status_code == 404
    report = client.get("/api/reports/usage", {"group": "agent"}).json()
    assert "reused" not in {row["group"] for row in report["rows"]}
    usage = client.get(f"/api/subscriptions/{plan.pk}/usage").json()
    assert "reused" not in {row["name"] for row in usage["observed"]["per_agent"]}
    assert client.get("/api/agents/reused/schedules").json() == []
    assert "reused" not in {b["agent"] for b in client.get("/api/budgets").json()}
    # The admin keeps the history (linked to no agent now), labelled with the old name.
    admin = _client(world["admin"].user)
    titles = [n["title"] for n in admin.get("/api/notifications").json()["results"]]
    assert "notice-of-reused" in titles
    assert admin.get("/api/notifications", {"agent": "reused"}).json()["results"] == []


def test_a_turn_id_of_another_operator_answers_like_a_missing_one(
    world: dict[str, Holdings],
) -> None:
    client = _client(world["alpha"].user)
    theirs = client.get(f"/api/executions/{world['bravo'].executions[0].pk}")
    missing = client.get(f"/api/executions/{uuid.uuid4()}")
    assert (theirs.status_code, missing.status_code) == (404, 404)


@pytest.mark.parametrize("viewer", OPERATORS)
def test_the_explainer_names_only_subscriptions_the_viewers_list_shows(
    world: dict[str, Holdings], viewer: str
) -> None:
    """The walk may serve any agent on any plan of the pool, so the explainer names
    them; the viewer's subscription list must show every plan it names."""
    client = _client(world[viewer].user)
    listed = {s["name"] for s in client.get("/api/subscriptions").json()}
    for agent in world[viewer].agents:
        routing = client.get(f"/api/agents/{agent.name}/routing").json()
        named = {
            line["name"] for line in routing["rungs"] + routing["excluded"] if line.get("name")
        }
        if routing["assigned"]:
            named.add(routing["assigned"]["name"])
        assert named, routing
        assert named - {"platform API key"} <= listed, (named, listed)
