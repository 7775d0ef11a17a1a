from __future__ import annotations

import pickle

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from subscriptions.models import Subscription
from tests.subscriptions.factories import SubscriptionFactory, plan_token
from trinity.crypto import DecryptionError, Secret

pytestmark = pytest.mark.django_db


def _stored_ciphertext(subscription: Subscription) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT token FROM subscriptions_subscription WHERE id = %s", [subscription.pk]
        )
        return str(cursor.fetchone()[0])


def test_a_token_round_trips_and_is_ciphertext_at_rest() -> None:
    token = plan_token()
    subscription = SubscriptionFactory.create(token=Secret(token))
    stored = _stored_ciphertext(subscription)
    assert token not in stored
    assert stored.startswith("gAAAA")
    assert Subscription.objects.get(pk=subscription.pk).token.reveal() == token


def test_a_secret_never_prints_itself() -> None:
    token = plan_token()
    secret = Secret(token)
    for rendered in (repr(secret), str(secret), f"{secret}", "%s" % secret):  # noqa: UP031
        assert token not in rendered
        assert token[-4:] in rendered
    with pytest.raises(TypeError):
        pickle.dumps(secret)


def test_rotation_reencrypts_every_secret_with_the_newest_key() -> None:
    old_key, new_key = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    token = plan_token()
    with override_settings(TRINITY_ENCRYPTION_KEYS=[old_key]):
        subscription = SubscriptionFactory.create(token=Secret(token))
        before = _stored_ciphertext(subscription)
    with override_settings(TRINITY_ENCRYPTION_KEYS=[new_key, old_key]):
        call_command("rotate_encryption_keys")
        after = _stored_ciphertext(subscription)
        assert after != before
        # Re-running touches nothing: every row is already on the newest key.
        call_command("rotate_encryption_keys")
        assert _stored_ciphertext(subscription) == after
    with override_settings(TRINITY_ENCRYPTION_KEYS=[new_key]):
        assert Subscription.objects.get(pk=subscription.pk).token.reveal() == token
    with (
        override_settings(TRINITY_ENCRYPTION_KEYS=[old_key]),
        pytest.raises(DecryptionError) as err,
    ):
        Subscription.objects.get(pk=subscription.pk)
    assert token not in str(err.value)
