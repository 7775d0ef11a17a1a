"""The key services' contract: what they refuse, and what a create, change and
revoke leave behind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User

from gateway.keys import (
    KEY_PREFIX,
    LIMIT_FIELDS,
    gateway_key_create,
    gateway_key_revoke,
    gateway_key_update,
    key_digest,
)
from gateway.models import GatewayKey
from tests.agents.factories import UserFactory
from tests.gateway.factories import GatewayKeyFactory
from trinity.errors import Conflict, InvalidInput

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)


def create(owner: User, name: str = "laptop", **values: Any) -> Any:
    return gateway_key_create(owner=owner, created_by=owner, name=name, now=T0, **values)


def test_a_created_key_is_kept_as_its_digest_and_shown_only_in_the_issue(owner: User) -> None:
    issued = create(owner, daily_tokens=1000, providers=["anthropic"])
    assert issued.key.startswith(KEY_PREFIX) and len(issued.key) == len(KEY_PREFIX) + 43
    row = GatewayKey.objects.get()
    assert row.digest == key_digest(issued.key)
    assert row.prefix == issued.key[len(KEY_PREFIX) : len(KEY_PREFIX) + 6]
    assert (row.daily_tokens, row.providers, row.created_at, row.updated_at) == (
        1000,
        ["anthropic"],
        T0,
        T0,
    )
    stored = " ".join(str(v) for v in GatewayKey.objects.values().get().values())
    assert issued.key not in stored
    assert issued.key not in repr(issued)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"providers": ["anthropic", "mistral"]}, "providers"),
        ({"model_families": ["opus", "gemini"]}, "model_families"),
        ({"expires_at": T0}, "expires_at"),
        ({"expires_at": T0 - timedelta(days=1)}, "expires_at"),
        *[({limit: 0}, limit) for limit in LIMIT_FIELDS],
        *[({limit: -1}, limit) for limit in LIMIT_FIELDS],
        ({"daily_usd": Decimal("0.0000")}, "daily_usd"),
        ({"name": "   "}, "name"),
    ],
)
def test_a_bad_value_is_refused_by_its_field_and_nothing_is_written(
    owner: User, values: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        gateway_key_create(owner=owner, created_by=owner, now=T0, **{"name": "laptop", **values})
    assert refused.value.field == field
    assert not GatewayKey.objects.exists()
    key = GatewayKeyFactory.create(owner=owner, name="kept")
    with pytest.raises(InvalidInput) as refused:
        gateway_key_update(key=key, now=T0, **values)
    assert refused.value.field == field
    assert GatewayKey.objects.get(pk=key.pk).updated_at == key.created_at


def test_an_unknown_field_is_refused(owner: User) -> None:
    with pytest.raises(InvalidInput, match="digest"):
        create(owner, digest="0" * 64)
    with pytest.raises(InvalidInput, match="owner"):
        gateway_key_update(key=GatewayKeyFactory.create(owner=owner), now=T0, owner=owner)


def test_a_name_is_unique_per_owner_only(owner: User, other_user: User) -> None:
    create(owner, "laptop")
    with pytest.raises(Conflict) as conflict:
        create(owner, "laptop")
    assert conflict.value.field == "name"
    assert GatewayKey.objects.filter(owner=owner).count() == 1
    create(other_user, "laptop")  # someone else's laptop
    second = create(owner, "desktop").row
    with pytest.raises(Conflict) as conflict:
        gateway_key_update(key=second, now=T0, name="laptop")
    assert conflict.value.field == "name"
    assert GatewayKey.objects.get(pk=second.pk).name == "desktop"


def test_a_change_is_saved_and_moves_updated_at(owner: User) -> None:
    key = GatewayKeyFactory.create(owner=owner, daily_tokens=10, created_at=T0)
    later = T0 + timedelta(minutes=5)
    gateway_key_update(key=key, now=later, daily_tokens=None, name=" renamed ")
    key.refresh_from_db()
    assert (key.daily_tokens, key.name, key.updated_at) == (None, "renamed", later)


def test_a_revoked_key_cannot_change_and_a_second_revoke_keeps_the_first_instant(
    owner: User,
) -> None:
    key = GatewayKeyFactory.create(owner=owner, created_at=T0)
    first = T0 + timedelta(hours=1)
    gateway_key_revoke(key=key, now=first)
    assert (key.revoked_at, key.updated_at) == (first, first)
    gateway_key_revoke(key=key, now=first + timedelta(hours=1))
    assert GatewayKey.objects.get(pk=key.pk).revoked_at == first
    with pytest.raises(Conflict, match="revoked"):
        gateway_key_update(key=key, now=first, name="again")
    assert GatewayKey.objects.get(pk=key.pk).name == key.name


def test_an_admin_creates_a_key_for_someone_else(owner: User, admin_user: User) -> None:
    issued = gateway_key_create(owner=owner, created_by=admin_user, name="ci", now=T0)
    assert (issued.row.owner, issued.row.created_by) == (owner, admin_user)
    assert UserFactory.create(username="third").gateway_keys.count() == 0
