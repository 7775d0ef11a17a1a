from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.agents.factories import AgentFactory
from tests.subscriptions.factories import SubscriptionFactory
from trinity.models import NotificationRead
from trinity.notifications import notification_send

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


@pytest.fixture
def notes(owner: User) -> dict[str, int]:
    mine = SubscriptionFactory.create(name="mine")
    my_bot = AgentFactory.create(name="my-bot", owner=owner, subscription=mine)
    their_bot = AgentFactory.create(name="their-bot", subscription=mine)
    ids = {}
    for key, kwargs in {
        "agent": {"agent_name": "my-bot", "agent_id": my_bot.pk},
        # About a plan of the shared pool, naming no agent (a headroom alert).
        "subscription": {"subscription_id": mine.pk, "level": "warning"},
        # About another owner's agent on the same plan: never this owner's to see.
        "foreign": {
            "agent_name": "their-bot",
            "agent_id": their_bot.pk,
            "subscription_id": mine.pk,
        },
        "global": {},
    }.items():
        note = notification_send(kind=f"k-{key}", title=key, now=NOW, **kwargs)  # type: ignore[arg-type]
        assert note is not None
        ids[key] = note.pk
    return ids


def test_admin_sees_every_notification(admin_client_api: APIClient, notes: dict[str, int]) -> None:
    titles = {n["title"] for n in admin_client_api.get("/api/notifications").json()["results"]}
    assert titles == {"agent", "subscription", "foreign", "global"}


def test_an_owner_sees_notifications_about_their_agents_and_the_pools_plans(
    owner_client: APIClient, other_client: APIClient, notes: dict[str, int]
) -> None:
    titles = {n["title"] for n in owner_client.get("/api/notifications").json()["results"]}
    assert titles == {"agent", "subscription"}
    # Another operator shares the pool (its plan's alert), never an owner's agents.
    assert [n["title"] for n in other_client.get("/api/notifications").json()["results"]] == [
        "subscription"
    ]


def test_notifications_filter_by_level_kind_and_agent(
    admin_client_api: APIClient, notes: dict[str, int]
) -> None:
    warning = admin_client_api.get("/api/notifications?level=warning").json()["results"]
    assert [n["title"] for n in warning] == ["subscription"]
    assert [
        n["title"]
        for n in admin_client_api.get("/api/notifications?kind=k-global").json()["results"]
    ] == ["global"]
    assert [
        n["title"]
        for n in admin_client_api.get("/api/notifications?agent=my-bot").json()["results"]
    ] == ["agent"]
    assert admin_client_api.get("/api/notifications?level=loud").status_code == 400


def test_anonymous_is_refused(anon_client: APIClient) -> None:
    assert anon_client.get("/api/notifications").status_code in (401, 403)


def test_notifications_are_marked_read_only_where_the_caller_can_see_them(
    owner_client: APIClient,
    other_client: APIClient,
    admin_client_api: APIClient,
    notes: dict[str, int],
) -> None:

    # Another user cannot mark what they cannot see, even by id.
    refused = other_client.post(
        "/api/notifications/mark-read", {"ids": [notes["agent"]]}, format="json"
    )
    assert refused.status_code == 200 and refused.json() == {"marked": 0}
    assert owner_client.post(
        "/api/notifications/mark-read", {"ids": [notes["agent"], notes["foreign"]]}, format="json"
    ).json() == {"marked": 1}
    unread = owner_client.get("/api/notifications?unread=true").json()["results"]
    assert [n["title"] for n in unread] == ["subscription"]
    read = owner_client.get("/api/notifications?unread=false").json()["results"]
    assert [n["title"] for n in read] == ["agent"] and read[0]["read_at"] is not None
    assert not NotificationRead.objects.filter(notification_id=notes["foreign"]).exists()
    # "all" marks every one the caller sees and has not read (the owner's read marks
    # are theirs: the admin still had all four unread); again, it marks nothing more.
    assert admin_client_api.post(
        "/api/notifications/mark-read", {"all": True}, format="json"
    ).json() == {"marked": 4}
    assert admin_client_api.post(
        "/api/notifications/mark-read", {"all": True}, format="json"
    ).json() == {"marked": 0}


def test_mark_read_rejects_a_bad_body_and_writes_nothing(
    owner_client: APIClient, anon_client: APIClient, notes: dict[str, int]
) -> None:

    assert owner_client.post("/api/notifications/mark-read", {}, format="json").status_code == 400
    bad = owner_client.post("/api/notifications/mark-read", {"ids": ["x"]}, format="json")
    assert bad.status_code == 400
    assert owner_client.get("/api/notifications?unread=maybe").status_code == 400
    assert (
        anon_client.post("/api/notifications/mark-read", {"all": True}, format="json").status_code
        == 401
    )
    assert not NotificationRead.objects.exists()


def _unread(client: APIClient) -> set[str]:
    return {n["title"] for n in client.get("/api/notifications?unread=true").json()["results"]}


def test_an_operator_marking_all_read_leaves_the_shared_notices_unread_for_everyone_else(
    owner_client: APIClient,
    other_client: APIClient,
    admin_client_api: APIClient,
    notes: dict[str, int],
) -> None:
    """Read state is per user: the owner clears what they see (their agent's notice and
    the shared plan's alert); the other operator and the admin still have theirs."""
    assert owner_client.post(
        "/api/notifications/mark-read", {"all": True}, format="json"
    ).json() == {"marked": 2}
    assert _unread(owner_client) == set()
    assert _unread(other_client) == {"subscription"}
    assert _unread(admin_client_api) == {"agent", "subscription", "foreign", "global"}
    shared = [
        n
        for n in admin_client_api.get("/api/notifications").json()["results"]
        if n["title"] == "subscription"
    ]
    assert shared[0]["read_at"] is None  # the admin's own read state

    # The other operator marks the shared alert by id: only theirs changes.
    assert other_client.post(
        "/api/notifications/mark-read", {"ids": [notes["subscription"]]}, format="json"
    ).json() == {"marked": 1}
    assert _unread(other_client) == set()
    assert _unread(admin_client_api) == {"agent", "subscription", "foreign", "global"}
    # The admin marks all: every notice, for the admin alone.
    assert admin_client_api.post(
        "/api/notifications/mark-read", {"all": True}, format="json"
    ).json() == {"marked": 4}
    assert _unread(admin_client_api) == set()
    assert NotificationRead.objects.count() == 2 + 1 + 4


def test_each_user_sees_when_they_read_it(
    owner_client: APIClient, admin_client_api: APIClient, notes: dict[str, int]
) -> None:
    import time_machine

    with time_machine.travel(NOW, tick=False):
        owner_client.post("/api/notifications/mark-read", {"ids": [notes["agent"]]}, format="json")
    later = NOW.replace(hour=13)
    with time_machine.travel(later, tick=False):
        admin_client_api.post(
            "/api/notifications/mark-read", {"ids": [notes["agent"]]}, format="json"
        )
    mine = owner_client.get("/api/notifications?unread=false").json()["results"]
    theirs = admin_client_api.get("/api/notifications?unread=false").json()["results"]
    assert [n["read_at"] for n in mine] == ["2026-11-30T12:00:00Z"]
    assert [n["read_at"] for n in theirs] == ["2026-11-30T13:00:00Z"]


def test_an_admins_lists_name_the_owner_of_each_of_two_owners_bots(
    owner: User, other_user: User, admin_client_api: APIClient, owner_client: APIClient
) -> None:
    """Names are unique per owner only: each turn and notice in an admin's lists names
    its agent's owner, and ``?agent=bot&owner=`` keeps exactly that owner's."""
    from execution.models import Execution

    bots = {
        user.username: AgentFactory.create(name="bot", owner=user) for user in (owner, other_user)
    }
    for whose, agent in bots.items():
        Execution.objects.create(
            agent=agent, agent_name="bot", message=f"turn of {whose}", created_at=NOW
        )
        notification_send(
            kind="k", title=f"notice of {whose}", agent_name="bot", agent_id=agent.pk, now=NOW
        )

    turns = admin_client_api.get("/api/executions").json()["results"]
    assert sorted((t["agent_name"], t["agent_owner"]) for t in turns) == [
        ("bot", "other"),
        ("bot", "owner"),
    ]
    notices = admin_client_api.get("/api/notifications").json()["results"]
    assert sorted((n["title"], n["agent_owner"]) for n in notices) == [
        ("notice of other", "other"),
        ("notice of owner", "owner"),
    ]
    theirs = admin_client_api.get("/api/executions?agent=bot&owner=other").json()["results"]
    assert [t["agent_owner"] for t in theirs] == ["other"]
    one = admin_client_api.get(f"/api/executions/{theirs[0]['id']}").json()
    assert one["agent_owner"] == "other"
    # An operator's list is their own: their own name as the owner.
    assert [t["agent_owner"] for t in owner_client.get("/api/executions").json()["results"]] == [
        "owner"
    ]
