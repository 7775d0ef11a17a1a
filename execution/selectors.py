from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import Coalesce, TruncDate

from agents.models import AuthMode
from execution.models import Execution, Status
from subscriptions.models import RateLimitEvent
from trinity.errors import NotFound


def executions_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Execution]:
    """Admins see every turn; others the turns of agents they own."""
    queryset = Execution.objects.select_related("served_by_subscription")
    if getattr(user, "is_staff", False):
        return queryset
    return queryset.filter(agent__owner_id=user.pk)


def execution_get_visible(*, user: AbstractBaseUser | AnonymousUser, pk: str) -> Execution:
    execution = executions_visible_to(user).filter(pk=pk).first()
    if execution is None:
        raise NotFound(f"No execution {pk}.")
    return execution


# --- usage reports ------------------------------------------------------------------

REPORT_GROUPS = ("day", "subscription", "agent", "credential")
# A row for turns the platform key served, and for turns nothing served (they failed
# before any credential answered), when grouping by subscription.
KEY_GROUP = "(platform API key)"
UNSERVED_GROUP = "(not served)"
REPORT_METRICS = (
    "turns",
    "succeeded",
    "failed",
    "input_tokens",
    "output_tokens",
    "key_spend_usd",
    "refusals",
    "switches",
)


def _empty_row(key: str) -> dict[str, Any]:
    row: dict[str, Any] = {"group": key}
    row.update({metric: 0 for metric in REPORT_METRICS})
    row["key_spend_usd"] = Decimal(0)
    return row


# Grouped by agent, a row is one agent (its id), never a name: two owners' "bot" are
# two rows, each labelled with its current name and its owner. Rows whose agent was
# deleted (its id gone) keep the name they were recorded under, with no owner.
_AGENT_COLUMNS: dict[str, Any] = {
    "k": F("agent_id"),
    "label": Coalesce(F("agent__name"), F("agent_name")),
    "owner": F("agent__owner__username"),
}


def _group_columns(group: str, key: Any) -> dict[str, Any]:
    """The columns a ``group`` row is told apart by: ``k`` (``key`` for every group
    but ``agent``'s)."""
    return dict(_AGENT_COLUMNS) if group == "agent" else {"k": key}


def _row_key(group: str, row: dict[str, Any], *, turn: bool) -> tuple[str, str, str]:
    """The report row ``row`` (a turn's or a refusal's aggregate) counts in, as
    (label, owner, agent id): the first two make its group and sort it."""
    if group == "agent":
        return (str(row["label"]), row["owner"] or "", str(row["k"] or ""))
    label = _turn_key(group, row) if turn else _event_key(group, row)
    return (label, "", "")


def _report_row(group: str, key: tuple[str, str, str]) -> dict[str, Any]:
    row = _empty_row(key[0])
    if group == "agent":
        row["owner"] = key[1] or None
    return row


def _turn_key(group: str, row: dict[str, Any]) -> str:
    if group == "day":
        return str(row["k"])
    if group == "subscription":
        if row["k"] is not None:
            return str(row["k"])
        return KEY_GROUP if row["kind"] == AuthMode.API_KEY else UNSERVED_GROUP
    if group == "credential":
        return row["kind"] or AuthMode.NONE.value
    return str(row["k"])


def _event_key(group: str, row: dict[str, Any]) -> str:
    if group == "subscription":
        return KEY_GROUP if row["k"] is None else str(row["k"])
    return str(row["k"])


def usage_report(
    *, user: AbstractBaseUser | AnonymousUser, start: datetime, end: datetime, group: str
) -> list[dict[str, Any]]:
    """Turns, tokens, platform-key spend, refusals and committed switches in
    ``[start, end)``, one row per ``group`` value (``REPORT_GROUPS``), sorted by it.

    Visibility is the executions': admins count every turn and refusal, others those
    of the agents they own. ``day`` rows are UTC days and every day of the range has
    one, zeros included (a chart needs the gaps). ``agent`` rows are agents, not
    names: each carries its ``owner`` (None for a deleted agent's history). Key spend
    is the cost of turns the platform key served; plans bill no tokens.
    """
    turn_keys = {
        "day": TruncDate("created_at", tzinfo=UTC),
        "subscription": F("served_by_subscription__name"),
        "agent": None,
        "credential": F("served_by_kind"),
    }
    columns = _group_columns(group, turn_keys[group])
    turns = (
        executions_visible_to(user)
        .filter(created_at__gte=start, created_at__lt=end)
        .select_related(None)
        .order_by()
        .annotate(**columns, kind=F("served_by_kind"))
        .values(*columns, "kind")
        .annotate(
            turns=Count("pk"),
            succeeded=Count("pk", filter=Q(status=Status.SUCCEEDED)),
            failed=Count("pk", filter=Q(status=Status.FAILED)),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            key_spend_usd=Sum("cost_usd", filter=Q(served_by_kind=AuthMode.API_KEY)),
            switches=Count("pk", filter=Q(subscription_switch__committed=True)),
        )
    )
    refusals = _refusals_by(user=user, start=start, end=end, group=group)

    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    if group == "day":
        day = start.astimezone(UTC).date()
        last = (end - timedelta(microseconds=1)).astimezone(UTC).date()
        while day <= last:
            rows[(day.isoformat(), "", "")] = _empty_row(day.isoformat())
            day += timedelta(days=1)
    for turn in turns:
        key = _row_key(group, turn, turn=True)
        row = rows.setdefault(key, _report_row(group, key))
        for metric in ("turns", "succeeded", "failed", "input_tokens", "output_tokens", "switches"):
            row[metric] += turn[metric] or 0
        row["key_spend_usd"] += turn["key_spend_usd"] or 0
    for refusal in refusals:
        key = _row_key(group, refusal, turn=False)
        rows.setdefault(key, _report_row(group, key))["refusals"] += refusal["refusals"]
    return [rows[key] for key in sorted(rows)]


def _refusals_by(
    *, user: AbstractBaseUser | AnonymousUser, start: datetime, end: datetime, group: str
) -> Any:
    """Refusal counts in ``[start, end)`` per ``group`` value, of the events ``user``
    may see."""
    events = RateLimitEvent.objects.filter(occurred_at__gte=start, occurred_at__lt=end)
    if not getattr(user, "is_staff", False):
        # By the agent's id: a deleted agent's refusals are not its namesake's.
        events = events.filter(agent__owner_id=user.pk)
    event_keys = {
        "day": TruncDate("occurred_at", tzinfo=UTC),
        "subscription": F("subscription__name"),
        "agent": None,
        "credential": F("credential_kind"),
    }
    columns = _group_columns(group, event_keys[group])
    by_key = events.order_by().annotate(**columns).values(*columns)
    return by_key.annotate(refusals=Count("pk"))


def usage_totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's rows summed, metric by metric."""
    totals = _empty_row("total")
    for row in rows:
        for metric in REPORT_METRICS:
            totals[metric] += row[metric]
    del totals["group"]
    return totals


def refusal_counts_since(*, since: datetime) -> dict[int, int]:
    """Refusals recorded against each subscription after ``since`` (subscription id →
    count); the platform key's are not a subscription's."""
    return dict(
        RateLimitEvent.objects.filter(occurred_at__gt=since, subscription__isnull=False)
        .order_by()
        .values_list("subscription_id")
        .annotate(n=Count("pk"))
        .values_list("subscription_id", "n")
    )
