"""GET /api/reports/usage: turns, tokens, key spend, refusals and switches, grouped by
day, subscription, agent or credential kind; JSON or CSV; visibility like executions."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import factory
import pytest
import time_machine
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from execution.models import Execution
from subscriptions.models import CredentialKind, FailureKind
from tests.agents.factories import AgentFactory, UserFactory
from tests.subscriptions.factories import RateLimitEventFactory, SubscriptionFactory

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DAY1 = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
DAY2 = datetime(2026, 11, 29, 23, 59, tzinfo=UTC)
pytestmark = pytest.mark.django_db


class ExecutionFactory(factory.django.DjangoModelFactory[Execution]):
    class Meta:
        model = Execution

    agent = factory.SubFactory(AgentFactory)
    agent_name = factory.LazyAttribute(lambda o: o.agent.name)
    message = "hi"
    status = "succeeded"
    served_by_kind = "subscription"
    input_tokens = 100
    output_tokens = 10
    created_at = DAY1


@pytest.fixture
def fleet(owner: User, other_user: User) -> dict[str, Any]:
    """The owner's bot: a plan-served turn, a walked turn that switched to plan-b, a
    key-served turn and a failed one; plus another user's agent with a key turn."""
    a = SubscriptionFactory.create(name="plan-a")
    b = SubscriptionFactory.create(name="plan-b")
    bot = AgentFactory.create(name="bot", owner=owner, subscription=b)
    theirs = AgentFactory.create(name="their-bot", owner=other_user, subscription=a)
    ExecutionFactory.create(agent=bot, served_by_subscription=a, created_at=DAY1)
    ExecutionFactory.create(
        agent=bot,
        served_by_subscription=b,
        created_at=DAY2,
        input_tokens=200,
        output_tokens=20,
        subscription_switch={"from": a.pk, "to": b.pk, "committed": True},
    )
    ExecutionFactory.create(
        agent=bot,
        served_by_kind="api_key",
        cost_usd=Decimal("0.250000"),
        created_at=DAY2,
        subscription_switch={"from": b.pk, "to": None, "kind": "api_key", "committed": False},
    )
    ExecutionFactory.create(
        agent=bot, status="failed", served_by_kind="", input_tokens=0, output_tokens=0
    )
    ExecutionFactory.create(
        agent=theirs, served_by_kind="api_key", cost_usd=Decimal("1.5"), created_at=DAY2
    )
    # Outside the range: counted nowhere.
    ExecutionFactory.create(agent=bot, created_at=DAY1 - timedelta(days=40))
    RateLimitEventFactory.create(agent=bot, agent_name="bot", subscription=a, occurred_at=DAY2)
    RateLimitEventFactory.create(
        agent=bot,
        agent_name="bot",
        subscription=None,
        credential_kind=CredentialKind.API_KEY,
        failure_kind=FailureKind.AUTH,
        occurred_at=DAY1,
    )
    RateLimitEventFactory.create(
        agent=theirs, agent_name="their-bot", subscription=a, occurred_at=DAY1
    )
    return {"a": a, "b": b}


def report(client: APIClient, query: str = "", **headers: Any) -> Any:
    with time_machine.travel(NOW, tick=False):
        return client.get(f"/api/reports/usage{query}", **headers)


def by_group(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["group"]: row for row in body["rows"]}


def test_an_owner_counts_only_their_agents_turns_and_refusals(
    owner_client: APIClient, fleet: dict[str, Any]
) -> None:
    body = report(owner_client, "?group=agent").json()
    assert list(by_group(body)) == ["bot"]
    bot = by_group(body)["bot"]
    assert (bot["turns"], bot["succeeded"], bot["failed"]) == (4, 3, 1)
    assert (bot["input_tokens"], bot["output_tokens"]) == (400, 40)
    assert bot["key_spend_usd"] == 0.25  # only the key-served turn; plans bill no tokens
    assert (bot["refusals"], bot["switches"]) == (2, 1)  # the key turn committed nothing


def test_another_user_sees_only_their_own_and_an_admin_sees_everything(
    other_client: APIClient, admin_client_api: APIClient, fleet: dict[str, Any]
) -> None:
    theirs = report(other_client, "?group=agent").json()
    assert [(r["group"], r["turns"], r["key_spend_usd"]) for r in theirs["rows"]] == [
        ("their-bot", 1, 1.5)
    ]
    everything = report(admin_client_api, "?group=agent").json()
    assert list(by_group(everything)) == ["bot", "their-bot"]
    assert everything["totals"]["turns"] == 5 and everything["totals"]["refusals"] == 3
    assert everything["totals"]["key_spend_usd"] == 1.75


def test_two_owners_agents_of_one_name_are_two_rows_each_with_its_owner(
    owner: User,
    other_user: User,
    owner_client: APIClient,
    other_client: APIClient,
    admin_client_api: APIClient,
) -> None:
    """Names are unique per owner only: an admin's report keeps the owner's "bot" and
    the other user's "bot" apart (turns, spend and refusals each on its own row), and
    each operator sees only their own row; a deleted agent's history keeps its name."""
    plan = SubscriptionFactory.create(name="plan-a")
    mine = AgentFactory.create(name="bot", owner=owner, subscription=plan)
    theirs = AgentFactory.create(name="bot", owner=other_user, subscription=plan)
    ExecutionFactory.create(agent=mine, served_by_subscription=plan)
    ExecutionFactory.create_batch(
        2, agent=theirs, served_by_kind="api_key", cost_usd=Decimal("0.5")
    )
    RateLimitEventFactory.create(
        agent=theirs, agent_name="bot", subscription=plan, occurred_at=DAY1
    )
    gone = AgentFactory.create(name="bot", owner=UserFactory.create(username="gone-owner"))
    ExecutionFactory.create(agent=gone)
    gone.delete()  # its turns keep the name, linked to no agent

    rows = report(admin_client_api, "?group=agent&from=2026-11-01").json()["rows"]
    assert [
        (r["group"], r["owner"], r["turns"], r["key_spend_usd"], r["refusals"]) for r in rows
    ] == [
        ("bot", None, 1, 0, 0),
        ("bot", "other", 2, 1.0, 1),
        ("bot", "owner", 1, 0, 0),
    ]
    for client, whose in ((owner_client, "owner"), (other_client, "other")):
        own = report(client, "?group=agent&from=2026-11-01").json()["rows"]
        assert [(r["group"], r["owner"]) for r in own] == [("bot", whose)]
    csv_rows = list(
        csv.DictReader(
            io.StringIO(
                report(admin_client_api, "?group=agent&from=2026-11-01&format=csv").content.decode()
            )
        )
    )
    assert [(r["agent"], r["owner"], r["turns"]) for r in csv_rows] == [
        ("bot", "", "1"),
        ("bot", "other", "2"),
        ("bot", "owner", "1"),
    ]


def test_other_groups_name_no_owner(admin_client_api: APIClient, fleet: dict[str, Any]) -> None:
    body = report(admin_client_api, "?group=subscription").json()
    assert {row["owner"] for row in body["rows"]} == {None} and "owner" not in body["totals"]


def test_days_are_utc_days_and_every_day_of_the_range_has_a_row(
    admin_client_api: APIClient, fleet: dict[str, Any]
) -> None:
    body = report(admin_client_api, "?from=2026-11-27&to=2026-11-30").json()
    assert body["from"] == "2026-11-27T00:00:00Z" and body["to"] == "2026-12-01T00:00:00Z"
    days = by_group(body)
    assert list(days) == ["2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30"]
    assert days["2026-11-27"]["turns"] == 0
    assert (days["2026-11-28"]["turns"], days["2026-11-28"]["refusals"]) == (2, 2)
    # 23:59 UTC on the 29th is the 29th.
    assert (days["2026-11-29"]["turns"], days["2026-11-29"]["key_spend_usd"]) == (3, 1.75)


def test_a_range_given_with_an_offset_has_a_row_for_every_utc_day_it_touches(
    admin_client_api: APIClient, fleet: dict[str, Any]
) -> None:
    # 19:00-05:00 on the 27th is midnight UTC on the 28th; 20:00-05:00 on the 30th is
    # 01:00 UTC on December 1st, a day with no turns that still gets its row.
    body = report(
        admin_client_api, "?from=2026-11-27T19:00:00-05:00&to=2026-11-30T20:00:00-05:00"
    ).json()
    assert list(by_group(body)) == ["2026-11-28", "2026-11-29", "2026-11-30", "2026-12-01"]
    assert by_group(body)["2026-12-01"]["turns"] == 0


def test_the_default_range_is_the_last_30_days(
    admin_client_api: APIClient, fleet: dict[str, Any]
) -> None:
    body = report(admin_client_api).json()
    assert body["group"] == "day" and len(body["rows"]) == 31  # a partial day at each end
    assert body["to"] == "2026-11-30T12:00:00Z" and body["totals"]["turns"] == 5


def test_grouping_by_subscription_names_the_key_and_unserved_turns(
    owner_client: APIClient, fleet: dict[str, Any]
) -> None:
    rows = by_group(report(owner_client, "?group=subscription").json())
    assert {k: (r["turns"], r["refusals"]) for k, r in rows.items()} == {
        "plan-a": (1, 1),
        "plan-b": (1, 0),
        "(platform API key)": (1, 1),
        "(not served)": (1, 0),
    }
    assert rows["plan-b"]["switches"] == 1


def test_grouping_by_credential_splits_plans_from_the_key(
    admin_client_api: APIClient, fleet: dict[str, Any]
) -> None:
    rows = by_group(report(admin_client_api, "?group=credential").json())
    assert {k: (r["turns"], r["key_spend_usd"], r["refusals"]) for k, r in rows.items()} == {
        "subscription": (2, 0, 2),
        "api_key": (2, 1.75, 1),
        "none": (1, 0, 0),
    }


def test_csv_has_a_header_and_one_parsable_line_per_row(
    owner_client: APIClient, fleet: dict[str, Any]
) -> None:
    response = report(owner_client, "?group=agent&from=2026-11-01", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="trinity-usage-agent')
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows == [
        {
            "agent": "bot",
            "owner": "owner",
            "turns": "4",
            "succeeded": "3",
            "failed": "1",
            "input_tokens": "400",
            "output_tokens": "40",
            "key_spend_usd": "0.250000",
            "refusals": "2",
            "switches": "1",
        }
    ]
    # ?format=csv for a download link, where no Accept header can be set.
    linked = report(owner_client, "?group=agent&from=2026-11-01&format=csv")
    assert linked.content == response.content


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?group=week", "group"),
        ("?from=yesterday", "from"),
        ("?to=2026-13-01", "to"),
        ("?from=2026-11-01T00:00:00", "from"),  # no offset: ambiguous
        ("?from=2026-11-30&to=2026-11-01", "from"),
        ("?from=2024-01-01&to=2026-01-01", "from"),  # longer than 400 days
    ],
)
def test_a_bad_parameter_is_a_400_naming_it_even_when_csv_was_asked_for(
    owner_client: APIClient, query: str, field: str
) -> None:
    for headers in ({}, {"HTTP_ACCEPT": "text/csv"}):
        response = report(owner_client, query, **headers)
        assert response.status_code == 400
        assert response["Content-Type"] == "application/json"
        assert field in response.json(), response.content


def test_anonymous_is_refused(anon_client: APIClient) -> None:
    assert report(anon_client).status_code == 401
    assert report(anon_client, "", HTTP_ACCEPT="text/csv").status_code == 401
