"""The growing lists page by cursor: every row once, newest first, while rows arrive."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from execution.models import Execution
from trinity.models import Notification

BASE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


def _turns(count: int, *, start: datetime, per_instant: int = 1) -> list[Execution]:
    """``count`` turns, ``per_instant`` of them sharing each created_at (ties)."""
    return Execution.objects.bulk_create(
        Execution(
            id=uuid.uuid4(),
            agent_name="bot",
            message="hi",
            status="succeeded",
            created_at=start + timedelta(seconds=i // per_instant),
        )
        for i in range(count)
    )


def _walk(client: APIClient, url: str, between: Any = None) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    page: dict[str, Any] = client.get(url).json()
    while True:
        seen.extend(page["results"])
        if between is not None:
            between()
        if page["next"] is None:
            return seen
        page = client.get(page["next"]).json()


def test_it_finds_every_turn_exactly_once_while_new_turns_arrive(
    admin_client_api: APIClient,
) -> None:
    # Seven turns per instant, so ties straddle page boundaries (200 is no multiple).
    before = {str(t.pk) for t in _turns(3000, start=BASE, per_instant=7)}
    arrivals = iter(range(1, 1000))

    def arrive() -> None:
        _turns(25, start=BASE + timedelta(days=1, minutes=next(arrivals)))

    seen = _walk(admin_client_api, "/api/executions?limit=200", between=arrive)

    ids = [row["id"] for row in seen]
    assert len(ids) == len(set(ids)) == 3000
    assert set(ids) == before
    instants = [row["created_at"] for row in seen]
    assert instants == sorted(instants, reverse=True)
    assert Execution.objects.count() > 3000  # the arrivals really happened


def test_a_page_is_fifty_newest_first_and_limit_is_capped(admin_client_api: APIClient) -> None:
    _turns(260, start=BASE)
    first = admin_client_api.get("/api/executions").json()
    assert set(first) == {"next", "previous", "results"}
    assert len(first["results"]) == 50 and first["previous"] is None
    assert first["results"][0]["created_at"] == (BASE + timedelta(seconds=259)).isoformat().replace(
        "+00:00", "Z"
    )
    assert len(admin_client_api.get("/api/executions?limit=1000").json()["results"]) == 200


def test_a_time_range_cuts_the_list_since_inclusive_until_exclusive(
    admin_client_api: APIClient,
) -> None:
    _turns(100, start=BASE)
    since = (BASE + timedelta(seconds=10)).isoformat()
    until = (BASE + timedelta(seconds=20)).isoformat()
    page = admin_client_api.get("/api/executions", {"since": since, "until": until}).json()
    assert [r["created_at"][17:19] for r in page["results"]] == [
        f"{s:02d}" for s in range(19, 9, -1)
    ]
    assert page["next"] is None


@pytest.mark.parametrize(
    "value",
    ["yesterday", "2026-11-30T12:00:00", "0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:00"],
)
def test_a_time_range_bound_that_is_not_an_instant_is_a_400_naming_it(
    admin_client_api: APIClient, value: str
) -> None:
    for name in ("since", "until"):
        response = admin_client_api.get("/api/notifications", {name: value})
        assert response.status_code == 400 and set(response.json()) == {name}
        response = admin_client_api.get("/api/executions", {name: value})
        assert response.status_code == 400 and set(response.json()) == {name}


def test_notifications_page_through_a_filter_exactly_once(admin_client_api: APIClient) -> None:
    Notification.objects.bulk_create(
        Notification(
            kind="k-loud" if i % 3 else "k-quiet",
            title=f"n{i}",
            created_at=BASE + timedelta(seconds=i // 4),
        )
        for i in range(900)
    )
    loud = set(Notification.objects.filter(kind="k-loud").values_list("pk", flat=True))
    seen = _walk(admin_client_api, "/api/notifications?kind=k-loud&limit=70")
    ids = [row["id"] for row in seen]
    assert len(ids) == len(set(ids)) and set(ids) == loud


def test_the_schema_documents_the_cursor_the_range_and_the_page(
    admin_client_api: APIClient,
) -> None:
    schema = admin_client_api.get("/api/schema/?format=json").json()
    for path in ("/api/executions", "/api/notifications"):
        get = schema["paths"][path]["get"]
        names = {p["name"] for p in get["parameters"]}
        assert {"cursor", "limit", "since", "until"} <= names, names
        ref = get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        page = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
        assert {"next", "previous", "results"} <= set(page["properties"])


def test_a_cursor_this_list_did_not_give_is_a_400_naming_it(admin_client_api: APIClient) -> None:
    for path in ("/api/executions", "/api/notifications"):
        response = admin_client_api.get(path, {"cursor": "not-a-cursor"})
        assert response.status_code == 400 and set(response.json()) == {"cursor"}
