"""manage.py trinity_status: every subscription and every agent in two tables, read
through the API's selectors, with no secret in the output."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from subscriptions.headroom.store import snapshots_write
from subscriptions.services import assignment_commit
from tests.agents.factories import AgentFactory
from tests.headroom.readings import limited, reading
from tests.subscriptions.factories import RateLimitEventFactory, SubscriptionFactory
from trinity import services as trinity_services

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


def status(*args: str) -> str:
    out = io.StringIO()
    with time_machine.travel(NOW, tick=False):
        call_command("trinity_status", *args, stdout=out)
    return out.getvalue()


def line_of(output: str, name: str) -> str:
    [line] = [row for row in output.splitlines() if row.startswith(name + " ")]
    return line


@pytest.fixture
def fleet(owner: User, other_user: User) -> dict[str, object]:
    roomy = SubscriptionFactory.create(name="roomy", plan_type="max-20x")
    full = SubscriptionFactory.create(name="full", plan_type="pro")
    SubscriptionFactory.create(name="unread")  # never sampled
    snapshots_write(
        {
            roomy.pk: reading(five_hour=12.0, seven_day=40.0, now=NOW),
            full.pk: limited(resets_in=timedelta(minutes=90), now=NOW),
        }
    )
    bot = AgentFactory.create(name="bot", owner=owner, subscription=full)
    AgentFactory.create(name="idle", owner=other_user)
    assert assignment_commit(
        agent=bot,
        expected_subscription_id=full.pk,
        expected_subscription_name="full",
        subscription_id=roomy.pk,
        subscription_name="roomy",
        why={
            "why": "ranked",
            "refused": "full refused",
            "tier": "measured",
            "candidate_count": 1,
            "five_hour": 12.0,
            "seven_day": 40.0,
        },
        now=NOW - timedelta(minutes=5),
    )
    # Two refusals in the 2h skip window, one older (24h only).
    for minutes in (10, 30, 180):
        RateLimitEventFactory.create(
            agent_name="bot", subscription=full, occurred_at=NOW - timedelta(minutes=minutes)
        )
    trinity_services.platform_api_key_set(key="sk-ant-api03-" + "K" * 40)
    return {"roomy": roomy, "full": full, "bot": bot}


def test_it_prints_every_subscription_with_its_windows_pressure_and_refusals(
    fleet: dict[str, object],
) -> None:
    output = status()
    assert "3 subscription(s): 1 measured, 1 unknown, 1 refusing, 1 rate limited now" in output
    roomy = line_of(output, "roomy")
    assert "12% resets 11-30 15:00Z (in 3h00m)" in roomy and "40%" in roomy
    assert "measured" in roomy and "no (reading)" in roomy and roomy.endswith("bot")
    assert "refusing" in line_of(output, "full")
    full = line_of(output, "full")
    assert "100% resets 11-30 13:30Z (in 1h30m)" in full
    assert "yes (reading)" in full
    # REFUSALS 2H and 24H columns, then no agents.
    assert full.split()[-3:] == ["2", "3", "-"]
    assert "unknown" in line_of(output, "unread")


def test_it_prints_every_agent_with_its_assignment_and_last_switch(
    fleet: dict[str, object],
) -> None:
    output = status()
    bot = line_of(output, "bot")
    assert "owner" in bot and "roomy" in bot
    assert "full -> roomy 5m ago" in bot
    from agents.models import Agent

    explanation = Agent.objects.get(name="bot").last_switch["explanation"]
    assert explanation.startswith("full refused") and bot.endswith(explanation)
    idle = line_of(output, "idle")
    assert idle.split()[:3] == ["idle", "other", "-"]


def test_it_agrees_with_the_fleet_pressure_api(
    fleet: dict[str, object], admin_client_api: APIClient
) -> None:
    with time_machine.travel(NOW, tick=False):
        api = admin_client_api.get("/api/agents/subscription-pressure").json()
    output = status()
    for row in api["subscriptions"]:
        line = line_of(output, row["name"])
        assert row["headroom"]["tier"] in line
        assert ("yes" if row["rate_limited_now"] else "no") + " (" in line


def test_it_never_prints_a_secret(fleet: dict[str, object]) -> None:
    from subscriptions.models import Subscription
    from trinity.selectors import system_settings_get

    output = status()
    secrets = [s.token.reveal() for s in Subscription.objects.all() if s.token]
    secrets.append(fleet["bot"].shared_secret.reveal())  # type: ignore[attr-defined]
    key = system_settings_get().platform_api_key
    assert key is not None
    secrets.append(key.reveal())
    for secret in secrets:
        assert secret not in output
        assert secret[-12:] not in output


def test_as_a_user_it_shows_what_that_user_sees(fleet: dict[str, object]) -> None:
    output = status("--user", "other")
    # The pool is shared (docs/security.md): every user sees every plan, only their
    # own agents.
    assert "3 subscription(s)" in output
    assert line_of(output, "idle") and "bot " not in output
    with pytest.raises(CommandError, match="No user 'nobody'"):
        status("--user", "nobody")
