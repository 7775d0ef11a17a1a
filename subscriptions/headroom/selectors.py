"""Reads for the headroom endpoints: one subscription's usage, its history, the fleet."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Sum
from django.db.models.functions import Coalesce

from routing.headroom.classification import Gate, Tier, classify_headroom
from routing.headroom.limited_now import reading_says_limited, resolve_rate_limited_now
from routing.headroom.reading import Reading, WindowReading
from subscriptions.headroom.store import Snapshots, SnapshotState, snapshot_read, snapshots_read
from subscriptions.models import FailureKind, HeadroomSample, RateLimitEvent, Subscription
from subscriptions.plan_facts import (
    fresh_for,
    last_failure_subquery,
    latest_failure_subquery,
)
from subscriptions.selectors import (
    is_admin,
    is_subscription_rate_limited,
    skip_window_start,
    subscriptions_visible_to,
)

HISTORY_WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
FAILURE_DISPLAY_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class HeadroomView:
    """The cached reading as the panel shows it: three-state, with its age and tier."""

    state: SnapshotState
    tier: Tier
    gate: Gate
    status: str | None = None
    fetched_at: datetime | None = None
    age_seconds: int | None = None
    source: str = ""
    reset_at: datetime | None = None
    representative_claim: str | None = None
    overage_status: str | None = None
    detail: str = ""
    windows: dict[str, WindowReading] = field(default_factory=dict)


def headroom_view(snapshots: Snapshots, subscription_id: int, *, now: datetime) -> HeadroomView:
    reading = snapshots.get(subscription_id)
    headroom = classify_headroom(reading, now=now, max_age=fresh_for())
    state = snapshots.state(subscription_id)
    if reading is None:
        return HeadroomView(state=state, tier=headroom.tier, gate=headroom.gate)
    return HeadroomView(
        state=state,
        tier=headroom.tier,
        gate=headroom.gate,
        status=reading.status.value,
        fetched_at=reading.fetched_at,
        age_seconds=max(0, int((now - reading.fetched_at).total_seconds())),
        source=reading.source,
        reset_at=reading.reset_at,
        representative_claim=reading.representative_claim,
        overage_status=reading.overage_status,
        detail=reading.detail,
        windows=dict(reading.windows),
    )


@dataclass(frozen=True)
class UsageView:
    subscription: Subscription
    headroom: HeadroomView
    rate_limited_now: bool
    rate_limited_source: str
    failures_24h: dict[str, int]
    last_probe: HeadroomSample | None
    observed: dict[str, Any]


def _rate_limited_now(
    reading: Reading | None,
    *,
    now: datetime,
    last_refusal_at: datetime | None,
    refusal_resets_at: datetime | None,
    events_say_limited: Any,
) -> tuple[bool, str]:
    decided = reading_says_limited(
        reading, now=now, max_age=fresh_for(), last_refusal_at=last_refusal_at
    )
    value = resolve_rate_limited_now(
        reading,
        now=now,
        max_age=fresh_for(),
        events_say_limited=events_say_limited,
        last_refusal_at=last_refusal_at,
        refusal_resets_at=refusal_resets_at,
    )
    return value, "reading" if decided is not None else "events"


OBSERVED_WINDOWS = {"five_hour": timedelta(hours=5), "seven_day": timedelta(days=7)}


def observed_usage(
    *, subscription: Subscription, now: datetime, user: AbstractBaseUser | AnonymousUser
) -> dict[str, Any]:
    """Turns this subscription served, with tokens and cost, over the last 5h and 7d,
    and per agent over the last 7d (``per_agent``: a list of ``{name, owner, turns,
    ...}``, one per agent, sorted by name and owner): every agent's for an admin, only
    the viewer's own agents' for anyone else (the pool is shared; other owners' turns
    are not theirs).

    Read through the reverse relation from executions: subscriptions does not import
    execution (dependencies point execution -> subscriptions).
    """
    served = subscription.served_executions.filter(status="succeeded")
    if not is_admin(user):
        served = served.filter(agent__owner_id=user.pk)
    totals = {
        "turns": Count("pk"),
        "input_tokens": Sum("input_tokens"),
        "output_tokens": Sum("output_tokens"),
        "cost_usd": Sum("cost_usd"),
    }

    def clean(row: dict[str, Any]) -> dict[str, Any]:
        return {
            "turns": row["turns"],
            "input_tokens": row["input_tokens"] or 0,
            "output_tokens": row["output_tokens"] or 0,
            "cost_usd": float(row["cost_usd"] or 0),
        }

    observed: dict[str, Any] = {}
    for name, span in OBSERVED_WINDOWS.items():
        window = served.filter(created_at__gt=now - span)
        observed[name] = {"since": now - span, **clean(window.aggregate(**totals))}
    # One row per agent (its id), never per name: an admin sees two owners' "bot" as
    # two rows, each with its owner; a deleted agent's turns keep their name, no owner.
    per_agent = (
        served.filter(created_at__gt=now - OBSERVED_WINDOWS["seven_day"])
        .annotate(label=Coalesce(F("agent__name"), F("agent_name")))
        .values("agent_id", "label", "agent__owner__username")
        .annotate(**totals)
        .order_by("label", "agent__owner__username", "agent_id")
    )
    observed["per_agent"] = [
        {"name": row["label"], "owner": row["agent__owner__username"], **clean(row)}
        for row in per_agent
    ]
    return observed


def headroom_usage_get(
    *, subscription: Subscription, now: datetime, user: AbstractBaseUser | AnonymousUser
) -> UsageView:
    """What one subscription has left, what refused it in 24h, and whether it is limited now.

    Whether it is limited is the pool's state (every viewer sees it alike); the
    refusal counts and the observed turns are the viewer's agents' only, unless the
    viewer is an admin.
    """
    snapshots = snapshot_read(subscription.pk)
    events = RateLimitEvent.objects.filter(subscription=subscription)
    counted = events if is_admin(user) else events.filter(agent__owner_id=user.pk)
    by_kind = (
        counted.filter(occurred_at__gt=now - FAILURE_DISPLAY_WINDOW)
        .values("failure_kind")
        .annotate(n=Count("pk"))
    )
    failures = {FailureKind.RATE_LIMIT.value: 0, FailureKind.AUTH.value: 0, "unknown": 0}
    for row in by_kind:
        failures[row["failure_kind"] or "unknown"] += row["n"]
    window_start = skip_window_start(now)
    last_refusal = (
        events.filter(occurred_at__gt=window_start)
        .order_by("-occurred_at")
        .values_list("occurred_at", "resets_at")
        .first()
    )
    last_refusal_at, refusal_resets_at = last_refusal or (None, None)
    limited, source = _rate_limited_now(
        snapshots.get(subscription.pk),
        now=now,
        last_refusal_at=last_refusal_at,
        refusal_resets_at=refusal_resets_at,
        events_say_limited=lambda: is_subscription_rate_limited(
            subscription_id=subscription.pk, now=now
        ),
    )
    return UsageView(
        subscription=subscription,
        headroom=headroom_view(snapshots, subscription.pk, now=now),
        rate_limited_now=limited,
        rate_limited_source=source,
        failures_24h=failures,
        last_probe=HeadroomSample.objects.filter(subscription=subscription)
        .order_by("-fetched_at")
        .first(),
        observed=observed_usage(subscription=subscription, now=now, user=user),
    )


def headroom_history_list(
    *, subscription_id: int, window: str, now: datetime
) -> QuerySet[HeadroomSample]:
    """History rows of the last ``window`` (24h, 7d or 30d), oldest first. KeyError otherwise."""
    since = now - HISTORY_WINDOWS[window]
    return HeadroomSample.objects.filter(
        subscription_id=subscription_id, fetched_at__gt=since
    ).order_by("fetched_at")


@dataclass(frozen=True)
class PressureRow:
    subscription: Subscription
    headroom: HeadroomView
    rate_limited_now: bool
    rate_limited_source: str
    failures_24h: int


@dataclass(frozen=True)
class FleetPressure:
    store: str
    rows: list[PressureRow]
    summary: dict[str, int]


def subscription_pressure_list(
    *, user: AbstractBaseUser | AnonymousUser, now: datetime
) -> FleetPressure:
    """Every subscription the user may see with its headroom: one query and one MGET."""
    window_start = skip_window_start(now)
    # The viewer's own agents' refusals only, unless an admin (the limited flag is the
    # pool's state: every refusal counts in it).
    recent = Q(rate_limit_events__occurred_at__gt=now - FAILURE_DISPLAY_WINDOW)
    own_refusals = Q(rate_limit_events__agent__owner_id=user.pk)
    subscriptions = list(
        subscriptions_visible_to(user).annotate(
            last_refusal_at=last_failure_subquery(now),
            last_refusal_resets_at=latest_failure_subquery(now, "resets_at"),
            limited_by_events=Exists(
                RateLimitEvent.objects.filter(
                    subscription=OuterRef("pk"),
                    failure_kind=FailureKind.RATE_LIMIT,
                    occurred_at__gt=window_start,
                )
            ),
            failures_24h=Count(
                "rate_limit_events",
                filter=recent if is_admin(user) else recent & own_refusals,
                distinct=True,
            ),
        )
    )
    snapshots = snapshots_read(s.pk for s in subscriptions)
    rows = []
    for sub in subscriptions:
        flag = bool(sub.limited_by_events)
        limited, source = _rate_limited_now(
            snapshots.get(sub.pk),
            now=now,
            last_refusal_at=sub.last_refusal_at,
            refusal_resets_at=sub.last_refusal_resets_at,
            events_say_limited=lambda flag=flag: flag,
        )
        rows.append(
            PressureRow(
                subscription=sub,
                headroom=headroom_view(snapshots, sub.pk, now=now),
                rate_limited_now=limited,
                rate_limited_source=source,
                failures_24h=sub.failures_24h,
            )
        )
    summary = Counter(row.headroom.tier.value for row in rows)
    return FleetPressure(
        store="ok" if snapshots.reachable else "unreachable",
        rows=rows,
        summary={
            "subscriptions": len(rows),
            "measured": summary[Tier.MEASURED.value],
            "unknown": summary[Tier.UNKNOWN.value],
            "refusing": summary[Tier.REFUSING.value],
            "rate_limited_now": sum(1 for row in rows if row.rate_limited_now),
        },
    )
