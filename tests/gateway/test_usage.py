"""The usage read model: exact figures per key, per person and overall, aggregated in
the database; and ``GET /api/gateway/usage`` for the owner / other operator / admin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from gateway.models import GatewayKey
from gateway.selectors import gateway_usage_summary
from tests.gateway.factories import GatewayKeyFactory, GatewayUsageFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)
URL = "/api/gateway/usage"
SINCE = "2026-06-01T00:00:00Z"
UNTIL = "2026-06-02T00:00:00Z"


def usage(key: GatewayKey, **values: Any) -> None:
    GatewayUsageFactory.create(key=key, at=values.pop("at", T0), **values)


@pytest.fixture
def world(owner: User, other_user: User) -> dict[str, GatewayKey]:
    """Two of the owner's keys and one of the other operator's, with known usage."""
    laptop = GatewayKeyFactory.create(owner=owner, name="laptop")
    ci = GatewayKeyFactory.create(owner=owner, name="ci")
    theirs = GatewayKeyFactory.create(owner=other_user, name="theirs")
    sonnet = {"model": "claude-sonnet-4-5"}
    plan = {"served_by_kind": "subscription", "served_by_name": "max-a"}
    usage(
        laptop,
        **sonnet,
        **plan,
        input_tokens=100,
        output_tokens=20,
        cache_read_tokens=1000,
        cache_write_tokens=50,
        list_usd=Decimal("0.010000"),
    )
    usage(
        laptop,
        **sonnet,
        **plan,
        input_tokens=200,
        output_tokens=30,
        disconnected=True,
        list_usd=Decimal("0.020000"),
    )
    usage(
        laptop,
        model="claude-opus-4-5",
        served_by_kind="api_key",
        served_by_name="platform",
        input_tokens=10,
        output_tokens=5,
        list_usd=Decimal("0.500000"),
        billed_usd=Decimal("0.500000"),
    )
    usage(laptop, **sonnet, status=429, served_by_kind="", served_by_name="")
    usage(
        ci,
        **sonnet,
        served_by_kind="subscription",
        served_by_name="max-b",
        input_tokens=1,
        output_tokens=2,
        list_usd=Decimal("0.000100"),
    )
    # A client that left before its answer: disconnected, not refused.
    usage(ci, **sonnet, status=499, disconnected=True, served_by_kind="", served_by_name="")
    usage(
        theirs,
        model="gpt-5-codex",
        provider="openai-codex",
        path="/v1/responses",
        served_by_kind="subscription",
        served_by_name="pro-c",
        input_tokens=7,
        output_tokens=3,
        list_usd=Decimal("0.070000"),
    )
    # Outside [since, until): before it, and at ``until`` itself.
    usage(laptop, **sonnet, at=T0 - timedelta(days=1), input_tokens=10**6)
    usage(laptop, **sonnet, at=datetime(2026, 6, 2, tzinfo=UTC), input_tokens=10**6)
    return {"laptop": laptop, "ci": ci, "theirs": theirs}


def figures(requests: int, **values: Any) -> dict[str, Any]:
    return {
        "requests": requests,
        "refused": 0,
        "disconnected": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "list_usd": "0.000000",
        "billed_usd": "0.000000",
        **values,
    }


LAPTOP_SONNET = figures(
    3,
    refused=1,
    disconnected=1,
    input_tokens=300,
    output_tokens=50,
    cache_read_tokens=1000,
    cache_write_tokens=50,
    list_usd="0.030000",
)
LAPTOP_OPUS = figures(
    1, input_tokens=10, output_tokens=5, list_usd="0.500000", billed_usd="0.500000"
)
LAPTOP = figures(
    4,
    refused=1,
    disconnected=1,
    input_tokens=310,
    output_tokens=55,
    cache_read_tokens=1000,
    cache_write_tokens=50,
    list_usd="0.530000",
    billed_usd="0.500000",
)
# Its second request's client left before the answer (499): disconnected, not refused.
CI = figures(2, disconnected=1, input_tokens=1, output_tokens=2, list_usd="0.000100")
THEIRS = figures(1, input_tokens=7, output_tokens=3, list_usd="0.070000")


def test_the_owner_sees_each_key_by_model_and_by_credential_with_exact_figures(
    owner_client: APIClient, world: dict[str, GatewayKey]
) -> None:
    response = owner_client.get(URL, {"since": SINCE, "until": UNTIL})
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["since"], data["until"]) == ("2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z")
    ci, laptop = data["keys"]  # by name
    assert laptop["key"] == {
        "id": world["laptop"].pk,
        "name": "laptop",
        "prefix": world["laptop"].prefix,
        "owner": "owner",
    }
    assert {k: laptop[k] for k in LAPTOP} == LAPTOP
    assert laptop["models"] == [
        {"model": "claude-sonnet-4-5", **LAPTOP_SONNET},
        {"model": "claude-opus-4-5", **LAPTOP_OPUS},
    ]
    assert laptop["served_by"] == [
        {
            "kind": "subscription",
            "name": "max-a",
            **figures(
                2,
                disconnected=1,
                input_tokens=300,
                output_tokens=50,
                cache_read_tokens=1000,
                cache_write_tokens=50,
                list_usd="0.030000",
            ),
        },
        {"kind": "", "name": "", **figures(1, refused=1)},
        {"kind": "api_key", "name": "platform", **LAPTOP_OPUS},
    ]
    assert ci["key"]["name"] == "ci" and {k: ci[k] for k in CI} == CI
    (mine,) = data["owners"]
    assert mine["owner"] == "owner" and mine["keys"] == 2
    assert [m["model"] for m in mine["models"]] == ["claude-sonnet-4-5", "claude-opus-4-5"]
    assert mine["models"][0] == {
        "model": "claude-sonnet-4-5",
        **figures(
            5,
            refused=1,
            disconnected=2,
            input_tokens=301,
            output_tokens=52,
            cache_read_tokens=1000,
            cache_write_tokens=50,
            list_usd="0.030100",
        ),
    }
    assert [(s["kind"], s["name"], s["requests"]) for s in mine["served_by"]] == [
        ("", "", 2),
        ("subscription", "max-a", 2),
        ("api_key", "platform", 1),
        ("subscription", "max-b", 1),
    ]
    assert data["totals"] == figures(
        6,
        refused=1,
        disconnected=2,
        input_tokens=311,
        output_tokens=57,
        cache_read_tokens=1000,
        cache_write_tokens=50,
        list_usd="0.530100",
        billed_usd="0.500000",
    )


def test_an_admin_sees_everyone_and_narrows_by_owner_or_key(
    admin_client_api: APIClient, world: dict[str, GatewayKey]
) -> None:
    everyone = admin_client_api.get(URL, {"since": SINCE, "until": UNTIL}).json()
    assert [(k["key"]["owner"], k["key"]["name"]) for k in everyone["keys"]] == [
        ("other", "theirs"),
        ("owner", "ci"),
        ("owner", "laptop"),
    ]
    assert [o["owner"] for o in everyone["owners"]] == ["other", "owner"]
    assert everyone["totals"]["requests"] == 7
    assert everyone["totals"]["list_usd"] == "0.600100"
    theirs = admin_client_api.get(URL, {"since": SINCE, "until": UNTIL, "owner": "other"})
    assert [k["key"]["name"] for k in theirs.json()["keys"]] == ["theirs"]
    assert {k: theirs.json()["totals"][k] for k in THEIRS} == THEIRS
    one = admin_client_api.get(
        URL, {"since": SINCE, "until": UNTIL, "key": str(world["laptop"].pk)}
    ).json()
    assert [k["key"]["name"] for k in one["keys"]] == ["laptop"]
    assert one["totals"] == LAPTOP


def test_another_operator_sees_only_their_own_and_a_foreign_key_id_is_404(
    other_client: APIClient, world: dict[str, GatewayKey]
) -> None:
    data = other_client.get(URL, {"since": SINCE, "until": UNTIL}).json()
    assert [k["key"]["name"] for k in data["keys"]] == ["theirs"]
    assert data["totals"]["requests"] == 1
    foreign = other_client.get(URL, {"key": world["laptop"].pk})
    assert foreign.status_code == 404
    assert "laptop" not in foreign.content.decode()
    assert other_client.get(URL, {"owner": "owner"}).json()["keys"] == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-06-01T00:00:00"}, "until"),  # no offset
        ({"since": UNTIL, "until": SINCE}, "since"),
        ({"since": SINCE, "until": SINCE}, "since"),
        ({"key": "one"}, "key"),
        ({"key": "0"}, "key"),
        ({"key": str(2**70)}, "key"),
        ({"owner": "no/such"}, "owner"),
    ],
)
def test_bad_parameters_are_400_by_name(
    owner_client: APIClient, params: dict[str, str], field: str
) -> None:
    response = owner_client.get(URL, params)
    assert response.status_code == 400
    assert field in response.json()


def test_by_default_it_covers_the_last_30_days(owner_client: APIClient, owner: User) -> None:
    key = GatewayKeyFactory.create(owner=owner)
    GatewayUsageFactory.create(key=key, at=datetime.now(UTC) - timedelta(days=29))
    GatewayUsageFactory.create(key=key, at=datetime.now(UTC) - timedelta(days=31))
    data = owner_client.get(URL).json()
    assert data["totals"]["requests"] == 1


def test_the_summary_is_two_grouped_queries_however_many_rows(
    world: dict[str, GatewayKey], django_assert_num_queries: Any
) -> None:
    for _ in range(20):
        usage(world["ci"], input_tokens=1)
    keys = GatewayKey.objects.all()
    with django_assert_num_queries(2):
        summary = gateway_usage_summary(
            keys=keys, since=T0 - timedelta(hours=1), until=T0 + timedelta(hours=1)
        )
    assert summary.totals.requests == 27
    assert summary.totals.input_tokens == 311 + 7 + 20
    assert [k.key_name for k in summary.keys] == ["theirs", "ci", "laptop"]


def test_no_usage_is_an_empty_summary(owner: User) -> None:
    GatewayKeyFactory.create(owner=owner)
    summary = gateway_usage_summary(keys=GatewayKey.objects.all())
    assert (summary.keys, summary.owners, summary.totals.requests) == ([], [], 0)
    assert summary.totals.list_usd == Decimal(0)
