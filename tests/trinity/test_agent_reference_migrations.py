"""The data migrations of the trust boundary, run on rows written before them: notices
and refusals are linked to the agent their name names only where that agent already
existed when they were written (a reused name's older history stays unlinked), the
agent's ``use_platform_api_key: true`` becomes unset, and an existing per-agent budget
is kept as the admin's cap too."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.apps.registry import Apps

from tests.migrations import migrate, migrated
from trinity.crypto import Secret

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("agents", "0004_routing_wait_and_budgets"),
    ("subscriptions", "0004_key_spend_ledger"),
    ("trinity", "0005_routing_policy_and_key_budgets"),
]
AFTER = [
    ("agents", "0005_admin_key_budget_caps_and_narrowing_key_flag"),
    ("subscriptions", "0005_refusal_references_its_agent"),
    ("trinity", "0007_notification_references_its_agent"),
]
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def before() -> Iterator[Apps]:
    with migrated(BEFORE) as apps:
        yield apps


def test_old_rows_are_linked_by_name_only_to_an_agent_that_already_existed(
    before: Apps,
) -> None:
    apps = before
    User = apps.get_model("auth", "User")
    Agent = apps.get_model("agents", "Agent")
    Subscription = apps.get_model("subscriptions", "Subscription")
    RateLimitEvent = apps.get_model("subscriptions", "RateLimitEvent")
    Notification = apps.get_model("trinity", "Notification")
    owner = User.objects.create(username="owner")
    plan = Subscription.objects.create(
        name="plan", provider="anthropic", plan_type="max-20x", token=Secret("sk-ant-oat01-x")
    )
    bot = Agent.objects.create(
        name="bot",
        owner=owner,
        use_platform_api_key=True,
        key_budget_daily_usd=Decimal("4.00"),
        shared_secret=Secret("s"),
    )
    Agent.objects.filter(pk=bot.pk).update(created_at=T0)
    quiet = Agent.objects.create(
        name="quiet", owner=owner, use_platform_api_key=False, shared_secret=Secret("q")
    )
    for name, at in (("bot", T0 + timedelta(hours=1)), ("bot", T0 - timedelta(days=3))):
        Notification.objects.create(
            kind="k", title=f"{name}@{at:%d}", agent_name=name, created_at=at
        )
        RateLimitEvent.objects.create(
            agent_name=name, subscription=plan, error_message=f"{at:%d}", occurred_at=at
        )
    Notification.objects.create(kind="k", title="gone", agent_name="deleted", created_at=T0)
    Notification.objects.create(kind="k", title="pool", subscription_id=plan.pk, created_at=T0)

    apps = migrate(AFTER)
    Agent = apps.get_model("agents", "Agent")
    Notification = apps.get_model("trinity", "Notification")
    RateLimitEvent = apps.get_model("subscriptions", "RateLimitEvent")

    linked = dict(Notification.objects.values_list("title", "agent_id"))
    assert linked == {
        f"bot@{(T0 + timedelta(hours=1)):%d}": bot.pk,
        f"bot@{(T0 - timedelta(days=3)):%d}": None,  # before this "bot" existed
        "gone": None,
        "pool": None,
    }
    refusals = dict(RateLimitEvent.objects.values_list("error_message", "agent_id"))
    assert refusals == {
        f"{(T0 + timedelta(hours=1)):%d}": bot.pk,
        f"{(T0 - timedelta(days=3)):%d}": None,
    }
    bot = Agent.objects.get(pk=bot.pk)
    assert bot.use_platform_api_key is None  # true could not widen: it means "follow"
    assert Agent.objects.get(pk=quiet.pk).use_platform_api_key is False
    assert (bot.key_budget_daily_usd, bot.admin_key_budget_daily_usd) == (
        Decimal("4.00"),
        Decimal("4.00"),
    )
    assert bot.admin_key_budget_monthly_usd is None
