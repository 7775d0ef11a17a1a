"""The platform refreshes a signed-in Claude plan's access token before it expires, once,
whoever else is trying; a dead refresh leaves the stored tokens as they were.

Real parts: the provider simulator's ``/v1/oauth/token`` (rotating, single-use refresh
tokens), PostgreSQL's row lock; the race is two forked processes.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import override_settings

from routing.rung import Rung, RungKind
from simulator.control import SimulatorControl
from subscriptions.claude_refresh import claude_credential_fresh, claude_wire_rung
from subscriptions.models import Subscription
from subscriptions.plan_refresh import Refresh
from subscriptions.services import subscription_register
from tests.subscriptions.racing import race_refresh
from trinity.crypto import Secret
from trinity.models import Notification

LABEL = "claude-max-sim"
ACCESS = "sk-ant-oat01-" + "a" * 80
REFRESH = "sk-ant-ort01-" + "r" * 80


def _plan(sim: SimulatorControl, *, expires_in: float) -> Subscription:
    """A signed-in Claude plan whose access token expires ``expires_in`` seconds from
    now (in the middle of its week); the simulator knows its sign-in."""
    sim.register(ACCESS, kind="oauth", label=LABEL, refresh_token=REFRESH, expires_in=3600)
    plan, _ = subscription_register(
        name="claude-max", provider="anthropic", plan_type="max-5x", token=ACCESS
    )
    plan.refresh_token = Secret(REFRESH)
    plan.token_expires_at = datetime.now(UTC) + timedelta(seconds=expires_in)
    plan.save()
    return plan


def stored_columns(plan: Subscription) -> tuple[str, str, datetime, str]:
    """The row's stored token columns as the database holds them (ciphertext)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT token, refresh_token, token_expires_at, token_fingerprint "
            "FROM subscriptions_subscription WHERE id = %s",
            [plan.pk],
        )
        row = cursor.fetchone()
    return row[0], row[1], row[2], row[3]


def _refreshes(sim: SimulatorControl) -> int:
    return sim.credential(LABEL)["refreshes"]


@pytest.mark.django_db
def test_a_token_that_holds_costs_nothing(sim: SimulatorControl) -> None:
    plan = _plan(sim, expires_in=3600)
    rung = Rung(
        RungKind.SUBSCRIPTION, plan.token, plan.pk, plan.name, expires_at=plan.token_expires_at
    )
    assert claude_wire_rung(rung, now=datetime.now(UTC)) is rung
    assert _refreshes(sim) == 0
    # A pasted token (no expiry) is never refreshed either.
    pasted = replace(rung, expires_at=None)
    assert claude_wire_rung(pasted, now=datetime.now(UTC) + timedelta(days=30)) is pasted


@pytest.mark.django_db
def test_a_token_about_to_expire_is_refreshed_before_the_turn_sends_it(
    sim: SimulatorControl,
) -> None:
    plan = _plan(sim, expires_in=120)
    rung = Rung(
        RungKind.SUBSCRIPTION, plan.token, plan.pk, plan.name, expires_at=plan.token_expires_at
    )

    sent = claude_wire_rung(rung, now=datetime.now(UTC))

    plan.refresh_from_db()
    assert plan.token is not None and plan.refresh_token is not None
    assert sent.secret.reveal() == plan.token.reveal() != ACCESS
    assert plan.refresh_token.reveal() != REFRESH
    assert plan.token_fingerprint == plan.token.reveal()[-4:]
    assert plan.token_expires_at is not None
    assert plan.token_expires_at > datetime.now(UTC) + timedelta(minutes=50)
    assert sent.expires_at == plan.token_expires_at
    assert _refreshes(sim) == 1


@pytest.mark.django_db
def test_a_revoked_refresh_token_leaves_the_stored_tokens_and_tells_the_operator_once(
    sim: SimulatorControl,
) -> None:
    plan = _plan(sim, expires_in=60)
    sim.revoke_refresh(REFRESH)
    before = stored_columns(plan)

    first = claude_credential_fresh(plan.pk, now=datetime.now(UTC))
    second = claude_credential_fresh(plan.pk, now=datetime.now(UTC))

    assert first.refresh is second.refresh is Refresh.SIGN_IN_DEAD
    assert first.code == "invalid_grant"
    assert first.credential.access_token == ACCESS  # the turn goes on with what it has
    assert stored_columns(plan) == before  # byte for byte: nothing was written
    notices = Notification.objects.filter(kind="claude_sign_in_dead")
    assert notices.count() == 1
    notice = notices.get()
    assert notice.title == "Claude plan 'claude-max' must be signed in again"
    assert notice.subscription_id == plan.pk and "invalid_grant" in notice.body
    assert _refreshes(sim) == 0


@pytest.mark.django_db
def test_an_unreachable_token_endpoint_changes_nothing(sim: SimulatorControl) -> None:
    plan = _plan(sim, expires_in=60)
    before = stored_columns(plan)
    with override_settings(TRINITY_CLAUDE_OAUTH_TOKEN_URL="http://127.0.0.1:9/v1/oauth/token"):
        fresh = claude_credential_fresh(plan.pk, now=datetime.now(UTC))
    assert fresh.refresh is Refresh.FAILED
    assert stored_columns(plan) == before
    assert not Notification.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_processes_racing_a_due_refresh_refresh_once_and_both_send_the_rotation(
    sim: SimulatorControl,
) -> None:
    plan = _plan(sim, expires_in=60)

    outcomes = race_refresh(sim, claude_credential_fresh, plan.pk)

    assert sorted(refresh for refresh, _, _ in outcomes) == ["not_due", "refreshed"]
    assert _refreshes(sim) == 1
    assert sim.oauth()["refreshes"] == 1
    plan.refresh_from_db()
    assert plan.token is not None
    assert {access for _, _, access in outcomes} == {plan.token.reveal()}
    assert plan.token.reveal() != ACCESS
    assert not sim.credential(LABEL)["revoked"]
