"""``/api/gateway/keys``: create (the key shown once), list, read, change, revoke; the
owner / other operator / admin trio for each."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from gateway.keys import KEY_PREFIX, key_digest
from gateway.models import GatewayKey
from tests.gateway.factories import GatewayKeyFactory
from trinity import clock

pytestmark = pytest.mark.django_db

URL = "/api/gateway/keys"
SHOWN = {
    "id",
    "name",
    "owner",
    "prefix",
    "status",
    "created_by",
    "created_at",
    "updated_at",
    "expires_at",
    "revoked_at",
    "providers",
    "model_families",
    "requests_per_minute",
    "max_streams",
    "daily_tokens",
    "monthly_tokens",
    "daily_usd",
    "monthly_usd",
}


def detail(key: GatewayKey | int) -> str:
    return f"{URL}/{key if isinstance(key, int) else key.pk}"


class TestCreate:
    def test_an_operator_creates_a_key_and_sees_it_once(
        self, owner_client: APIClient, owner: User
    ) -> None:
        body = {
            "name": "laptop",
            "providers": ["anthropic"],
            "model_families": ["sonnet", "haiku"],
            "daily_tokens": 100_000,
            "daily_usd": "5.25",
            "expires_at": (clock.now() + timedelta(days=30)).isoformat(),
        }
        response = owner_client.post(URL, body, format="json")
        assert response.status_code == 201, response.content
        data = response.json()
        key = data.pop("key")
        assert set(data) == SHOWN
        assert key.startswith(KEY_PREFIX) and data["prefix"] == key[len(KEY_PREFIX) :][:6]
        assert data["owner"] == data["created_by"] == "owner"
        assert data["status"] == "active" and data["revoked_at"] is None
        assert (data["daily_tokens"], data["daily_usd"], data["max_streams"]) == (
            100_000,
            "5.2500",
            None,
        )
        assert "no-store" in response["Cache-Control"]
        row = GatewayKey.objects.get()
        assert (row.owner, row.digest, row.providers) == (owner, key_digest(key), ["anthropic"])
        # Never again: not in the list, the detail, a change or a revoke.
        for answer in (
            owner_client.get(URL),
            owner_client.get(detail(row)),
            owner_client.patch(detail(row), {"name": "renamed"}, format="json"),
            owner_client.delete(detail(row)),
        ):
            assert answer.status_code == 200
            assert key not in answer.content.decode()
            assert row.digest not in answer.content.decode()

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({}, "name"),
            ({"name": ""}, "name"),
            ({"name": "bad\nname"}, "name"),
            ({"name": "k", "providers": ["mistral"]}, "providers"),
            ({"name": "k", "providers": ["anthropic", "anthropic"]}, "providers"),
            ({"name": "k", "providers": "anthropic"}, "providers"),
            ({"name": "k", "model_families": ["gemini"]}, "model_families"),
            ({"name": "k", "daily_tokens": 0}, "daily_tokens"),
            ({"name": "k", "monthly_tokens": -5}, "monthly_tokens"),
            ({"name": "k", "requests_per_minute": 2**31}, "requests_per_minute"),
            ({"name": "k", "max_streams": 1.5}, "max_streams"),
            ({"name": "k", "daily_usd": 5}, "daily_usd"),
            ({"name": "k", "daily_usd": "0"}, "daily_usd"),
            ({"name": "k", "monthly_usd": "-1.00"}, "monthly_usd"),
            ({"name": "k", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
            ({"name": "k", "expires_at": "soon"}, "expires_at"),
            ({"name": "k", "expires_at": "2099-01-01T00:00:00"}, "expires_at"),
            ({"name": "k", "expires_at": "2099-01-01T00:00:00Z\x00"}, "expires_at"),
            ({"name": "k", "owner": "../root"}, "owner"),
        ],
    )
    def test_bad_input_is_400_by_field_and_writes_nothing(
        self, owner_client: APIClient, body: dict[str, Any], field: str
    ) -> None:
        response = owner_client.post(URL, body, format="json")
        assert response.status_code == 400, response.content
        assert field in response.json()
        assert not GatewayKey.objects.exists()

    def test_a_name_the_owner_already_uses_is_a_conflict(
        self, owner_client: APIClient, owner: User, other_user: User
    ) -> None:
        GatewayKeyFactory.create(owner=owner, name="laptop")
        GatewayKeyFactory.create(owner=other_user, name="desktop")
        response = owner_client.post(URL, {"name": "laptop"}, format="json")
        assert response.status_code == 409
        assert response.json() == {"name": ["A gateway key named 'laptop' exists already."]}
        assert owner_client.post(URL, {"name": "desktop"}, format="json").status_code == 201
        assert GatewayKey.objects.count() == 3

    def test_only_an_admin_creates_a_key_for_someone_else(
        self,
        owner_client: APIClient,
        admin_client_api: APIClient,
        owner: User,
        other_user: User,
        admin_user: User,
    ) -> None:
        refused = owner_client.post(URL, {"name": "k", "owner": "other"}, format="json")
        assert refused.status_code == 403
        assert not GatewayKey.objects.exists()
        mine = owner_client.post(URL, {"name": "k", "owner": "owner"}, format="json")
        assert mine.status_code == 201 and mine.json()["owner"] == "owner"

        made = admin_client_api.post(
            URL, {"name": "ci", "owner": "other", "daily_tokens": 10}, format="json"
        )
        assert made.status_code == 201, made.content
        assert (made.json()["owner"], made.json()["created_by"]) == ("other", "admin")
        row = GatewayKey.objects.get(name="ci")
        assert (row.owner, row.created_by) == (other_user, admin_user)
        unknown = admin_client_api.post(URL, {"name": "x", "owner": "nobody"}, format="json")
        assert unknown.status_code == 400 and "owner" in unknown.json()


class TestRead:
    def test_the_list_is_the_callers_own_and_an_admin_sees_all(
        self,
        owner_client: APIClient,
        other_client: APIClient,
        admin_client_api: APIClient,
        owner: User,
        other_user: User,
    ) -> None:
        GatewayKeyFactory.create(owner=owner, name="mine")
        GatewayKeyFactory.create(owner=other_user, name="theirs")
        assert [k["name"] for k in owner_client.get(URL).json()] == ["mine"]
        assert [k["name"] for k in other_client.get(URL).json()] == ["theirs"]
        assert {(k["owner"], k["name"]) for k in admin_client_api.get(URL).json()} == {
            ("owner", "mine"),
            ("other", "theirs"),
        }
        assert [k["name"] for k in admin_client_api.get(f"{URL}?owner=other").json()] == ["theirs"]
        assert owner_client.get(f"{URL}?owner=other").json() == []
        assert owner_client.get(f"{URL}?owner=a%00b").status_code == 400

    def test_one_key_is_its_owners_and_the_admins_to_read(
        self,
        owner_client: APIClient,
        other_client: APIClient,
        admin_client_api: APIClient,
        owner: User,
    ) -> None:
        key = GatewayKeyFactory.create(owner=owner)
        assert owner_client.get(detail(key)).json()["id"] == key.pk
        assert admin_client_api.get(detail(key)).json()["owner"] == "owner"
        hidden = other_client.get(detail(key))
        missing = other_client.get(detail(key.pk + 1000))
        assert hidden.status_code == missing.status_code == 404
        assert hidden.json()["code"] == missing.json()["code"] == "not_found"

    def test_the_status_says_active_expired_or_revoked(
        self, owner_client: APIClient, owner: User
    ) -> None:
        now = clock.now()
        GatewayKeyFactory.create(owner=owner, name="a", expires_at=now + timedelta(hours=1))
        GatewayKeyFactory.create(owner=owner, name="e", expires_at=now - timedelta(seconds=1))
        GatewayKeyFactory.create(
            owner=owner, name="r", revoked_at=now, expires_at=now - timedelta(hours=1)
        )
        statuses = {k["name"]: k["status"] for k in owner_client.get(URL).json()}
        assert statuses == {"a": "active", "e": "expired", "r": "revoked"}


class TestChange:
    def test_the_owner_tightens_and_the_admin_loosens(
        self, owner_client: APIClient, admin_client_api: APIClient, owner: User
    ) -> None:
        key = GatewayKeyFactory.create(
            owner=owner, daily_tokens=1000, daily_usd=Decimal("5"), providers=["anthropic"]
        )
        tighter = {"daily_tokens": 500, "daily_usd": "4.50", "max_streams": 2, "name": "lap"}
        response = owner_client.patch(detail(key), tighter, format="json")
        assert response.status_code == 200, response.content
        assert response.json()["daily_tokens"] == 500
        assert response.json()["max_streams"] == 2
        key.refresh_from_db()
        assert (key.daily_usd, key.name) == (Decimal("4.5"), "lap")

        loosened = admin_client_api.patch(
            detail(key), {"daily_tokens": None, "providers": []}, format="json"
        )
        assert loosened.status_code == 200, loosened.content
        key.refresh_from_db()
        assert (key.daily_tokens, key.providers) == (None, [])

    @pytest.mark.parametrize(
        "change",
        [
            {"daily_tokens": 1001},
            {"daily_tokens": None},
            {"daily_usd": "5.0001"},
            {"providers": []},
            {"providers": ["anthropic", "openai-codex"]},
            {"expires_at": None},
        ],
    )
    def test_the_owner_cannot_raise_widen_or_clear_a_restriction(
        self, owner_client: APIClient, owner: User, change: dict[str, Any]
    ) -> None:
        expires = clock.now() + timedelta(days=1)
        key = GatewayKeyFactory.create(
            owner=owner,
            daily_tokens=1000,
            daily_usd=Decimal("5"),
            providers=["anthropic"],
            expires_at=expires,
        )
        response = owner_client.patch(detail(key), change, format="json")
        assert response.status_code == 403
        assert next(iter(change)) in response.json()["detail"]
        after = GatewayKey.objects.get(pk=key.pk)
        assert (after.daily_tokens, after.providers, after.expires_at, after.updated_at) == (
            1000,
            ["anthropic"],
            expires,
            key.updated_at,
        )

    def test_another_operator_cannot_change_it(self, other_client: APIClient, owner: User) -> None:
        key = GatewayKeyFactory.create(owner=owner, name="lap")
        assert other_client.patch(detail(key), {"name": "x"}, format="json").status_code == 404
        assert GatewayKey.objects.get(pk=key.pk).name == "lap"

    def test_bad_input_and_a_revoked_key_are_refused(
        self, owner_client: APIClient, owner: User
    ) -> None:
        key = GatewayKeyFactory.create(owner=owner)
        bad = owner_client.patch(detail(key), {"max_streams": 0}, format="json")
        assert bad.status_code == 400 and "max_streams" in bad.json()
        key.revoked_at = clock.now()
        key.save()
        revoked = owner_client.patch(detail(key), {"name": "again"}, format="json")
        assert revoked.status_code == 409
        assert revoked.json()["code"] == "conflict"


class TestRevoke:
    def test_the_owner_revokes_once_and_again_is_the_same_answer(
        self, owner_client: APIClient, other_client: APIClient, owner: User
    ) -> None:
        key = GatewayKeyFactory.create(owner=owner)
        assert other_client.delete(detail(key)).status_code == 404
        assert GatewayKey.objects.get(pk=key.pk).revoked_at is None
        first = owner_client.delete(detail(key))
        assert first.status_code == 200
        assert first.json()["status"] == "revoked"
        again = owner_client.delete(detail(key))
        assert again.status_code == 200
        assert again.json()["revoked_at"] == first.json()["revoked_at"]

    def test_an_admin_revokes_anyones_key(
        self, admin_client_api: APIClient, other_user: User
    ) -> None:
        key = GatewayKeyFactory.create(owner=other_user)
        response = admin_client_api.delete(detail(key))
        assert response.status_code == 200 and response.json()["status"] == "revoked"
        assert GatewayKey.objects.get(pk=key.pk).revoked_at is not None

    def test_an_unknown_id_is_404(self, admin_client_api: APIClient) -> None:
        assert admin_client_api.delete(detail(10**6)).status_code == 404
        assert admin_client_api.get(f"{URL}/{2**70}").status_code == 404


def test_the_signed_out_get_nothing(anon_client: APIClient, owner: User) -> None:
    key = GatewayKeyFactory.create(owner=owner)
    for answer in (
        anon_client.get(URL),
        anon_client.post(URL, {"name": "x"}, format="json"),
        anon_client.get(detail(key)),
        anon_client.delete(detail(key)),
        anon_client.get("/api/gateway/usage"),
        anon_client.get("/api/gateway/streams"),
    ):
        assert answer.status_code in (401, 403)
    assert GatewayKey.objects.get(pk=key.pk).revoked_at is None
