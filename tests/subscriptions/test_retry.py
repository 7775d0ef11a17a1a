"""Retry a credential now, without a provider: who may, what it clears, what it audits,
and that a refusal of it writes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from subscriptions.models import RateLimitEvent
from subscriptions.retry import platform_key_retry_now
from tests.subscriptions.factories import RateLimitEventFactory, SubscriptionFactory
from trinity import clock
from trinity import services as trinity_services
from trinity.errors import Conflict
from trinity.models import Notification, SystemSettings

pytestmark = pytest.mark.django_db

KEY = "sk-ant-api03-" + "k" * 40
URL = "/api/settings/platform-api-key/retry"


@pytest.mark.parametrize(("client", "status"), [("owner", 403), ("other", 403), ("admin", 200)])
def test_only_an_admin_retries_the_key(
    client: str,
    status: int,
    owner_client: APIClient,
    other_client: APIClient,
    admin_client_api: APIClient,
) -> None:
    trinity_services.platform_api_key_set(key=KEY)
    RateLimitEventFactory.create(
        subscription=None, credential_kind="api_key", credential_fingerprint="kkkk"
    )
    clients = {"owner": owner_client, "other": other_client, "admin": admin_client_api}
    assert clients[client].post(URL).status_code == status
    assert RateLimitEvent.objects.exists() is (status != 200)
    assert Notification.objects.filter(kind="credential_retry").exists() is (status == 200)


def test_a_key_retry_clears_only_the_configured_keys_refusals_in_the_window() -> None:
    trinity_services.platform_api_key_set(key=KEY)
    now = clock.now()
    kept_other = RateLimitEventFactory.create(
        subscription=None, credential_kind="api_key", credential_fingerprint="zzzz"
    )
    aged = RateLimitEventFactory.create(
        subscription=None,
        credential_kind="api_key",
        credential_fingerprint="kkkk",
        occurred_at=now - timedelta(hours=3),
    )
    RateLimitEventFactory.create(
        subscription=None, credential_kind="api_key", credential_fingerprint="kkkk"
    )
    plan = RateLimitEventFactory.create()

    with time_machine.travel(now, tick=False):
        result = platform_key_retry_now(actor="ops", now=now)

    assert (result.cleared, result.fingerprint) == (1, "kkkk")
    assert set(RateLimitEvent.objects.values_list("pk", flat=True)) == {
        kept_other.pk,
        aged.pk,
        plan.pk,
    }
    audit = Notification.objects.get(kind="credential_retry")
    assert audit.data["actor"] == "ops" and audit.data["at"] == now.isoformat()
    assert KEY not in audit.title + audit.body + str(audit.data)


def test_without_a_key_a_retry_is_refused_and_writes_nothing(admin_client_api: APIClient) -> None:
    assert admin_client_api.post(URL).status_code == 409
    assert not SystemSettings.objects.exists()
    with pytest.raises(Conflict):
        platform_key_retry_now(actor="ops", now=clock.now())
    with pytest.raises(CommandError, match="No platform API key"):
        call_command("credential_retry", platform_key=True)
    assert not Notification.objects.exists()


def test_a_subscription_retry_is_admin_only(
    owner_client: APIClient, other_client: APIClient, admin_user: User
) -> None:
    subscription = SubscriptionFactory.create()
    RateLimitEventFactory.create(subscription=subscription)
    for client in (owner_client, other_client):
        assert client.post(f"/api/subscriptions/{subscription.pk}/retry").status_code == 403
    assert RateLimitEvent.objects.filter(subscription=subscription).count() == 1
    with pytest.raises(CommandError, match="No subscription named"):
        call_command("credential_retry", subscription="nope")
