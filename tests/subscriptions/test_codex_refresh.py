"""The platform refreshes a Codex plan's sign-in, once, whoever else is trying.

Real parts: the provider simulator's ``/oauth/token`` (rotating, single-use refresh
tokens) and PostgreSQL's row lock; the race is two forked processes.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from django.test import override_settings

from simulator.control import SimulatorControl
from subscriptions.codex_refresh import Refresh, codex_credential_fresh
from subscriptions.models import Subscription
from subscriptions.services import subscription_register
from tests.subscriptions.racing import race_refresh
from tests.subscriptions.test_codex_credential import jwt
from trinity.models import Notification
from trinity_contract.codex import AUTH_CLAIMS

ACCOUNT = "acct-refresh"
LABEL = "gpt-pro-sim"


def _plan(sim: SimulatorControl, *, expires_in: float) -> tuple[Subscription, str]:
    """A Codex plan whose access token expires ``expires_in`` seconds from now; the
    simulator knows its sign-in (account, refresh token)."""
    access = jwt(
        {"exp": int(time.time() + expires_in), AUTH_CLAIMS: {"chatgpt_account_id": ACCOUNT}}
    )
    refresh = "rt-first-" + "r" * 24
    sim.register(access, kind="codex", label=LABEL, account_id=ACCOUNT, refresh_token=refresh)
    auth = {"tokens": {"access_token": access, "refresh_token": refresh, "account_id": ACCOUNT}}
    plan, _ = subscription_register(
        name="gpt-pro", provider="openai-codex", plan_type="pro", token=json.dumps(auth)
    )
    return plan, access


def _stored(plan: Subscription) -> dict[str, str]:
    plan.refresh_from_db()
    stored: dict[str, str] = json.loads(plan.token.reveal())
    return stored


def _refreshes(sim: SimulatorControl) -> int:
    return sim.credential(LABEL)["refreshes"]


@pytest.mark.django_db
def test_a_token_that_holds_is_sent_as_it_is(sim: SimulatorControl) -> None:
    plan, access = _plan(sim, expires_in=3600)
    fresh = codex_credential_fresh(plan.pk, now=datetime.now(UTC))
    assert fresh.refresh is Refresh.NOT_DUE
    assert fresh.credential.access_token == access
    assert _refreshes(sim) == 0


@pytest.mark.django_db
def test_a_token_about_to_expire_is_refreshed_and_the_rotation_stored(
    sim: SimulatorControl,
) -> None:
    plan, access = _plan(sim, expires_in=60)
    fresh = codex_credential_fresh(plan.pk, now=datetime.now(UTC))
    assert fresh.refresh is Refresh.REFRESHED
    stored = _stored(plan)
    assert stored["access_token"] == fresh.credential.access_token != access
    assert stored["refresh_token"] == fresh.credential.refresh_token != "rt-first-" + "r" * 24
    assert stored["account_id"] == ACCOUNT
    assert plan.token_fingerprint == fresh.credential.access_token[-4:]
    assert _refreshes(sim) == 1
    # The rotated tokens hold: the next turn refreshes nothing.
    assert codex_credential_fresh(plan.pk, now=datetime.now(UTC)).refresh is Refresh.NOT_DUE


@pytest.mark.django_db
def test_a_dead_sign_in_keeps_the_stored_tokens_and_says_so(sim: SimulatorControl) -> None:
    plan, access = _plan(sim, expires_in=60)
    sim.revoke(access)
    before = _stored(plan)
    fresh = codex_credential_fresh(plan.pk, now=datetime.now(UTC))
    assert fresh.refresh is Refresh.SIGN_IN_DEAD
    assert fresh.code == "refresh_token_invalidated"
    assert _stored(plan) == before
    # The operator is told once, whatever the number of turns that meet it.
    codex_credential_fresh(plan.pk, now=datetime.now(UTC))
    notice = Notification.objects.get(kind="codex_sign_in_dead")
    assert notice.title == "Codex plan 'gpt-pro' must be signed in again"
    assert "refresh_token_invalidated" in notice.body and notice.subscription_id == plan.pk


@pytest.mark.django_db
def test_an_unreachable_sign_in_service_changes_nothing() -> None:
    with override_settings(TRINITY_CODEX_AUTH_URL="http://127.0.0.1:9"):
        access = jwt({"exp": int(time.time() + 60)})
        auth = {"tokens": {"access_token": access, "refresh_token": "rt-x" * 6, "account_id": "a"}}
        plan, _ = subscription_register(
            name="gpt-pro", provider="openai-codex", plan_type="pro", token=json.dumps(auth)
        )
        before = _stored(plan)
        fresh = codex_credential_fresh(plan.pk, now=datetime.now(UTC))
    assert fresh.refresh is Refresh.FAILED
    assert fresh.credential.access_token == access
    assert _stored(plan) == before


@pytest.mark.django_db(transaction=True)
def test_two_processes_racing_to_refresh_spend_the_refresh_token_once(
    sim: SimulatorControl,
) -> None:
    plan, access = _plan(sim, expires_in=60)

    outcomes = race_refresh(sim, codex_credential_fresh, plan.pk)

    assert sorted(refresh for refresh, _, _ in outcomes) == ["not_due", "refreshed"], outcomes
    assert {code for _, code, _ in outcomes} == {""}
    tokens = {token for _, _, token in outcomes}
    assert len(tokens) == 1 and access not in tokens  # both send the rotated token
    assert _refreshes(sim) == 1
    assert _stored(plan)["access_token"] in tokens


@pytest.mark.django_db
def test_a_resend_on_an_expiring_plan_refreshes_from_the_stored_tokens(
    sim: SimulatorControl,
) -> None:
    """A turn sending on the same plan again holds only its wire form (no refresh
    token): due, the stored tokens are read and refreshed, once."""
    from routing.rung import Rung, RungKind
    from subscriptions.codex_refresh import codex_wire_rung
    from trinity.crypto import Secret

    plan, access = _plan(sim, expires_in=60)
    wire_form = Rung(
        RungKind.SUBSCRIPTION, Secret(access), plan.pk, plan.name, plan.provider, ACCOUNT
    )
    sent = codex_wire_rung(wire_form, now=datetime.now(UTC))
    assert sent.secret.reveal() == _stored(plan)["access_token"] != access
    assert sent.account_id == ACCOUNT
    assert _refreshes(sim) == 1
