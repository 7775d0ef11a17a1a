"""What the database and the cache say about plans, as the routing core reads it.

Facts only: every verdict on them is ``routing.eligibility.admit``'s. The provider's
plans come as candidates in one query (the SQL narrows by provider, nothing else); the
assignment's and a session's plan's facts are their row and one cache round trip
(snapshot, refusal mark, forecast); the selection is every candidate with its cached
reading (one ``get_many``), judged and ranked by ``routing``. Nothing here probes; a
store that does not answer only leaves the readings out (the plans are still judged),
so headroom never blocks a turn.

A new rule's fact joins here: a column of ``_CANDIDATES_SQL`` and ``_candidates_orm``
(every plan of the provider) and of ``candidate_of_plan`` (a plan whose row is in
memory), in ``Candidate``'s order (``docs/flows/adding-a-rule.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.models import (
    BooleanField,
    CharField,
    Count,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from psycopg.types.datetime import TimestamptzLoader

from agents.models import Agent
from routing.eligibility import Admission, Candidate, PlanFacts
from routing.facts import TurnFacts
from routing.headroom.alternatives import Selection, select
from routing.headroom.candidates import candidate_of, candidate_row, in_load_balance_order
from routing.rung import Rung
from subscriptions.headroom.store import RefusalMark, snapshots_read, turn_evidence_read
from subscriptions.models import RateLimitEvent, Subscription
from subscriptions.rung_secrets import plan_rung
from subscriptions.selectors import skip_window_start

logger = logging.getLogger(__name__)

_SUBSCRIPTION_ID = itemgetter(0)  # a candidate's


def fresh_for() -> timedelta:
    """How old a reading may be and still be evidence."""
    return timedelta(seconds=settings.TRINITY_HEADROOM_FRESH_SECONDS)


def skip_window() -> timedelta:
    """How long a refusal keeps its plan out."""
    return timedelta(seconds=settings.RATE_LIMIT_WINDOW_SECONDS)


def forecast_for() -> timedelta:
    """How long a turn is expected to run, for a forecast."""
    return timedelta(seconds=settings.TRINITY_FORECAST_TURN_SECONDS)


def latest_failure_subquery(now: datetime, column: str) -> Subquery:
    """``column`` of the latest refusal inside the skip window (any kind)."""
    window_start = skip_window_start(now)
    return Subquery(
        RateLimitEvent.objects.filter(subscription=OuterRef("pk"), occurred_at__gt=window_start)
        .order_by("-occurred_at")
        .values(column)[:1]
    )


def last_failure_subquery(now: datetime) -> Subquery:
    """The latest refusal of any kind (legacy NULL rows too) inside the skip window.

    The same question as ``has_recent_subscription_failures``, asked of every row at
    once: an event exactly one window old has aged out.
    """
    return latest_failure_subquery(now, "occurred_at")


def candidates_read(*, provider: str, now: datetime, terms: bool = True) -> list[Candidate]:
    """Every plan of ``provider`` as a candidate, in load-balance order: its row, its
    agent count and its latest refusal inside the skip window. One query. On Postgres
    the counts and refusals are joined as two aggregates (``_CANDIDATES_SQL``);
    elsewhere, and as its reference, ``_candidates_orm``.

    ``terms`` False leaves out what only a policy that restricts plans reads (plan
    type, billing class, overage: None; ``Admission.hard_stop_only`` says when they
    are read): three strings a row, a third of the rows' decoding at 10,000 plans."""
    queryset: QuerySet[Subscription] = Subscription.objects.filter(provider=provider)
    if connections[queryset.db].vendor == "postgresql":
        return _candidates_postgres(queryset, now, terms=terms)
    return _candidates_orm(queryset, now, terms=terms)


def _candidates_orm(
    queryset: QuerySet[Subscription], now: datetime, *, terms: bool = True
) -> list[Candidate]:
    # A Count over a join grouped by every subscription column, and a correlated
    # subquery per row for each refusal column: ~10x the Postgres shape at 10,000.
    rows = (
        queryset.annotate(
            agent_count=Count("agents", distinct=True),
            last_failure_at=last_failure_subquery(now),
            last_failure_resets_at=latest_failure_subquery(now, "resets_at"),
            last_failure_window=latest_failure_subquery(now, "limiting_window"),
            last_failure_kind=latest_failure_subquery(now, "failure_kind"),
            paused=ExpressionWrapper(Q(paused_at__isnull=False), output_field=BooleanField()),
            terms_plan_type=F("plan_type") if terms else Value(None, output_field=CharField()),
            terms_billing_class=F("billing_class")
            if terms
            else Value(None, output_field=CharField()),
            terms_overage=F("overage") if terms else Value(None, output_field=CharField()),
        )
        .order_by("name")
        .values_list(
            "pk",
            "name",
            "agent_count",
            "last_failure_at",
            "last_failure_resets_at",
            "last_failure_window",
            "last_failure_kind",
            "paused",
            "terms_plan_type",
            "terms_billing_class",
            "terms_overage",
        )
    )
    return in_load_balance_order([candidate_of(row) for row in rows])


# The same facts as ``_candidates_orm``: the agent counts aggregated once (not per
# subscription through a grouped join), the latest refusal in the skip window per
# subscription by one DISTINCT ON over the window's events (not a correlated subquery
# per row and column). ``where`` is the caller's queryset's own WHERE on the
# subscriptions table (the provider). The rows come in name order (the unique index on
# name gives it without a sort), as ``in_load_balance_order`` takes them. On psycopg 3
# the rows are built as candidates by C code alone: ``candidate_row`` as the row
# factory, and psycopg's own (C) timestamptz loader for this cursor instead of
# Django's, which is Python (a ``replace(tzinfo=)`` per value, to the same UTC instant).
_CANDIDATES_SQL = """
SELECT {subscriptions}.id, {subscriptions}.name, COALESCE(a.n, 0) AS agent_count,
       f.occurred_at, f.resets_at, f.limiting_window, f.failure_kind,
       {subscriptions}.paused_at IS NOT NULL AS paused,
       CASE WHEN %s THEN {subscriptions}.plan_type END,
       CASE WHEN %s THEN {subscriptions}.billing_class END,
       CASE WHEN %s THEN {subscriptions}.overage END
FROM {subscriptions}
LEFT JOIN (
    SELECT subscription_id, COUNT(*) AS n FROM {agents}
    WHERE subscription_id IS NOT NULL GROUP BY subscription_id
) a ON a.subscription_id = {subscriptions}.id
LEFT JOIN (
    SELECT DISTINCT ON (subscription_id)
        subscription_id, occurred_at, resets_at, limiting_window, failure_kind
    FROM {events}
    WHERE occurred_at > %s AND subscription_id IS NOT NULL
    ORDER BY subscription_id, occurred_at DESC
) f ON f.subscription_id = {subscriptions}.id
WHERE {where}
ORDER BY {subscriptions}.name
"""


def _candidates_postgres(
    queryset: QuerySet[Subscription], now: datetime, *, terms: bool = True
) -> list[Candidate]:
    connection = connections[queryset.db]
    quote = connection.ops.quote_name
    query = queryset.query
    compiled, where_params = query.get_compiler(using=queryset.db).compile(query.where)
    sql = _CANDIDATES_SQL.format(
        subscriptions=quote(Subscription._meta.db_table),
        agents=quote(Agent._meta.db_table),
        events=quote(RateLimitEvent._meta.db_table),
        where=compiled or "TRUE",
    )
    with connection.cursor() as cursor:
        raw = cursor.cursor
        if hasattr(raw, "row_factory"):  # psycopg 3
            raw.adapters.register_loader("timestamptz", TimestamptzLoader)
            raw.row_factory = _candidate_rows
        cursor.execute(sql, (terms, terms, terms, skip_window_start(now), *where_params))
        rows = cursor.fetchall()
    if rows and type(rows[0]) is not Candidate:
        rows = [candidate_of(row) for row in rows]
    return in_load_balance_order(rows)


def _candidate_rows(cursor: Any) -> Callable[[Sequence[Any]], Candidate]:
    # No intermediate row tuples: 10,000 of them would outlive the fetch only to be
    # copied, and the garbage collector would walk them on the way.
    return candidate_row


def candidate_of_plan(subscription: Subscription, mark: RefusalMark | None) -> Candidate:
    """The candidate of a plan whose row is in memory (the agent's assignment, a
    session's plan), its latest refusal from the cache mark ``mark`` beside its
    snapshot (the event is the truth; the mark spares the turn a query)."""
    return Candidate(
        subscription.pk,
        subscription.name,
        0,
        mark.at if mark is not None else None,
        mark.resets_at if mark is not None else None,
        mark.limiting_window if mark is not None else None,
        mark.failure_kind if mark is not None else None,
        subscription.paused_at is not None,
        subscription.plan_type,
        subscription.billing_class,
        subscription.overage,
    )


def plan_facts_read(subscription: Subscription) -> PlanFacts:
    """The facts of a plan whose row is in memory: its row, and its snapshot, refusal
    mark and exhaustion forecast in one cache round trip (never raises: a cache that
    does not answer leaves them unknown)."""
    cached = turn_evidence_read(subscription.pk)
    return PlanFacts(
        candidate_of_plan(subscription, cached.refusal),
        reading=cached.reading,
        forecast=cached.forecast,
        reachable=cached.reachable,
    )


def session_plan_read(subscription_id: int, *, provider: str) -> tuple[PlanFacts, Rung | None]:
    """The facts of the plan a chat session's previous turn ran on, and its rung with its
    token: one query (absent unless it is still ``provider``'s, with a token) and one
    cache round trip."""
    row = (
        Subscription.objects.filter(pk=subscription_id, provider=provider)
        .only(
            "pk",
            "name",
            "token",
            "provider",
            "plan_type",
            "billing_class",
            "overage",
            "paused_at",
            "token_expires_at",
        )
        .first()
    )
    if row is None or not row.token:
        return PlanFacts(Candidate(subscription_id, "", 0), present=False), None
    return plan_facts_read(row), plan_rung(row)


def selection_read(admission: Admission, *, strategy: str) -> Selection:
    """Every plan of the admission's provider, judged for its turn and ranked with
    ``strategy`` by the cached readings (one query, one ``get_many``). A store that does
    not answer, or a ranking that raises, leaves the readings out: the plans are still
    judged, in load-balance order, with a logged warning."""
    candidates = candidates_read(
        provider=admission.provider, now=admission.now, terms=admission.hard_stop_only
    )
    snapshots = snapshots_read(list(map(_SUBSCRIPTION_ID, candidates)))
    if not snapshots.reachable:
        logger.warning("headroom store unreachable: judging %d plans unread", len(candidates))
        return select(candidates, None, admission, strategy=strategy)
    try:
        return select(candidates, snapshots.readings, admission, strategy=strategy)
    except Exception:  # a ranking bug must not fail a turn: judge without readings, loudly
        logger.warning("headroom ranking failed: judging the plans unread", exc_info=True)
        return select(candidates, None, admission, strategy=strategy, fallback="ranking_failed")


def with_settings(turn: TurnFacts) -> TurnFacts:
    """``turn`` with the settings a turn's facts carry: how long a reading is evidence,
    how long a refusal keeps a plan out, how long a turn is expected to run for a
    forecast (``routing.facts`` holds their defaults)."""
    return replace(
        turn, fresh_for=fresh_for(), skip_window=skip_window(), forecast_for=forecast_for()
    )
