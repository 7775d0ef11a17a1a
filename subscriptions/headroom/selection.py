"""Where an agent may go: filter in the DB, rank by cached headroom in the service.

Nothing here probes: it reads the cached snapshots once (one ``get_many``). If the
store is unreachable or the ranking raises, the DB's load-balance order comes back
with a logged warning, so headroom can never block a turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Count, OuterRef, QuerySet, Subquery
from psycopg.types.datetime import TimestamptzLoader

from agents.models import Agent
from routing import billing, policy
from routing.headroom.alternatives import Selection
from routing.headroom.candidates import (
    Candidate,
    candidate_of,
    candidate_row,
    in_load_balance_order,
)
from routing.headroom.classification import NO_EVIDENCE, Tier
from routing.headroom.ranking import BANDED, Ranked, rank_candidates
from routing.headroom.windows import family_window
from subscriptions.headroom.store import snapshots_read
from subscriptions.models import RateLimitEvent, Subscription
from subscriptions.selectors import skip_window_start
from trinity.selectors import system_settings_get

logger = logging.getLogger(__name__)


def fresh_for() -> timedelta:
    return timedelta(seconds=settings.TRINITY_HEADROOM_FRESH_SECONDS)


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


def candidates_filtered(
    *, provider: str, exclude_ids: Iterable[int], now: datetime, only_hard_stop: bool = False
) -> list[Candidate]:
    """The provider's subscriptions minus ``exclude_ids``, in load-balance order.

    One query: agent count and the latest recent refusal come with each row. A
    candidate with ``last_failure_at`` set is skip-listed. ``only_hard_stop`` keeps
    only plans whose overage is a documented hard stop (``subscription-only``).
    On Postgres the counts and refusals are joined as two aggregates
    (``_CANDIDATES_SQL``); elsewhere, and as its reference, ``_candidates_orm``.
    """
    queryset: QuerySet[Subscription] = Subscription.objects.filter(provider=provider)
    if only_hard_stop:
        # The catalog decides, not only the columns copied at registration: a row whose
        # plan type is uncurated (edited, or dropped from the catalog) is ``unknown``.
        queryset = queryset.filter(
            plan_type__in=billing.hard_stop_plan_types(provider),
            billing_class=billing.PLAN,
            overage=billing.REFUSE,
        )
    excluded = list(exclude_ids)
    if excluded:
        queryset = queryset.exclude(pk__in=excluded)
    if connections[queryset.db].vendor == "postgresql":
        return _candidates_postgres(queryset, now)
    return _candidates_orm(queryset, now)


def _candidates_orm(queryset: QuerySet[Subscription], now: datetime) -> list[Candidate]:
    # A Count over a join grouped by every subscription column, and a correlated
    # subquery per row for each refusal column: ~10x the Postgres shape at 10,000.
    rows = (
        queryset.annotate(
            agent_count=Count("agents", distinct=True),
            last_failure_at=last_failure_subquery(now),
            last_failure_resets_at=latest_failure_subquery(now, "resets_at"),
            last_failure_window=latest_failure_subquery(now, "limiting_window"),
        )
        .order_by("name")
        .values_list(
            "pk",
            "name",
            "agent_count",
            "last_failure_at",
            "last_failure_resets_at",
            "last_failure_window",
        )
    )
    return in_load_balance_order([candidate_of(row) for row in rows])


# The same facts as ``_candidates_orm``: the agent counts aggregated once (not per
# subscription through a grouped join), the latest refusal in the skip window per
# subscription by one DISTINCT ON over the window's events (not three correlated
# subqueries per row). ``where`` is the caller's queryset's own WHERE on the
# subscriptions table, so every filter on it (provider, exclusions, hard stop) applies
# unchanged. The rows come in name order (the unique index on name gives it without a
# sort), as ``in_load_balance_order`` takes them. On psycopg 3 the rows are built as
# candidates by C code alone: ``candidate_row`` as the row factory, and psycopg's own
# (C) timestamptz loader for this cursor instead of Django's, which is Python (a
# ``replace(tzinfo=)`` per value, to the same UTC instant).
_CANDIDATES_SQL = """
SELECT {subscriptions}.id, {subscriptions}.name, COALESCE(a.n, 0) AS agent_count,
       f.occurred_at, f.resets_at, f.limiting_window
FROM {subscriptions}
LEFT JOIN (
    SELECT subscription_id, COUNT(*) AS n FROM {agents}
    WHERE subscription_id IS NOT NULL GROUP BY subscription_id
) a ON a.subscription_id = {subscriptions}.id
LEFT JOIN (
    SELECT DISTINCT ON (subscription_id)
        subscription_id, occurred_at, resets_at, limiting_window
    FROM {events}
    WHERE occurred_at > %s AND subscription_id IS NOT NULL
    ORDER BY subscription_id, occurred_at DESC
) f ON f.subscription_id = {subscriptions}.id
WHERE {where}
ORDER BY {subscriptions}.name
"""


def _candidates_postgres(queryset: QuerySet[Subscription], now: datetime) -> list[Candidate]:
    connection = connections[queryset.db]
    quote = connection.ops.quote_name
    table = quote(Subscription._meta.db_table)
    query = queryset.query
    if set(query.alias_map) - {Subscription._meta.db_table}:
        # A filter that joins another table: the ids through a subquery instead.
        filtered, params = queryset.order_by().values("pk").query.sql_with_params()
        where, params = f"{table}.id IN ({filtered})", tuple(params)
    else:
        compiled, where_params = query.get_compiler(using=queryset.db).compile(query.where)
        where, params = (compiled or "TRUE"), tuple(where_params)
    sql = _CANDIDATES_SQL.format(
        subscriptions=table,
        agents=quote(Agent._meta.db_table),
        events=quote(RateLimitEvent._meta.db_table),
        where=where,
    )
    with connection.cursor() as cursor:
        raw = cursor.cursor
        if hasattr(raw, "row_factory"):  # psycopg 3
            raw.adapters.register_loader("timestamptz", TimestamptzLoader)
            raw.row_factory = _candidate_rows
        cursor.execute(sql, (skip_window_start(now), *params))
        rows = cursor.fetchall()
    if rows and type(rows[0]) is not Candidate:
        rows = [candidate_of(row) for row in rows]
    return in_load_balance_order(rows)


def _candidate_rows(cursor: Any) -> Callable[[Sequence[Any]], Candidate]:
    # No intermediate row tuples: 10,000 of them would outlive the fetch only to be
    # copied, and the garbage collector would walk them on the way.
    return candidate_row


def _db_order(candidates: Sequence[Candidate], fallback: str, now: datetime) -> Selection:
    return Selection(
        ranked=tuple(
            Ranked(c, Tier.UNKNOWN, NO_EVIDENCE) for c in candidates if c.last_failure_at is None
        ),
        last_resort=tuple(c for c in candidates if c.last_failure_at is not None),
        fallback=fallback,
        now=now,
    )


def candidates_rank(
    candidates: Sequence[Candidate],
    *,
    now: datetime,
    family: str | None = None,
    strategy: str = BANDED,
) -> Selection:
    """Rank ``candidates`` by their cached readings with ``strategy`` (banded or
    balanced: ``rank_candidates``); DB order if that cannot be done."""
    snapshots = snapshots_read([c[0] for c in candidates])  # c[0]: the subscription id
    if not snapshots.reachable:
        logger.warning(
            "headroom store unreachable: ranking %d candidates in DB order", len(candidates)
        )
        return _db_order(candidates, "store_unreachable", now)
    try:
        ranking = rank_candidates(
            candidates,
            snapshots.readings,
            now=now,
            max_age=fresh_for(),
            family=family,
            strategy=strategy,
        )
    except Exception:  # a ranking bug must not fail a turn: fall back, loudly
        logger.warning("headroom ranking failed: using DB order", exc_info=True)
        return _db_order(candidates, "ranking_failed", now)
    return Selection(ranking.ranked, ranking.last_resort, ranking.dropped, now=now)


def rank_alternatives(
    *,
    agent: Agent,
    exclude_ids: Iterable[int] = (),
    now: datetime,
    only_hard_stop: bool | None = None,
    model: str | None = None,
    strategy: str | None = None,
) -> Selection:
    """The subscriptions ``agent`` could run on instead of its own, best first.

    Ranked for ``model``'s family (the turn's model; None: the agent's), with
    ``strategy`` (None: the system setting ``routing_strategy``).

    Excludes the agent's current subscription and ``exclude_ids`` (those a walk
    already tried). ``only_hard_stop`` (None: as the agent's routing policy says)
    keeps only hard-stop plans. Never probes and never raises for a store outage.
    """
    excluded = set(exclude_ids)
    if agent.subscription_id is not None:
        excluded.add(agent.subscription_id)
    if only_hard_stop is None:
        only_hard_stop = policy.only_hard_stop(agent.routing_policy)
    candidates = candidates_filtered(
        provider=agent.provider, exclude_ids=excluded, now=now, only_hard_stop=only_hard_stop
    )
    if strategy is None:
        strategy = system_settings_get().routing_strategy
    return candidates_rank(
        candidates, now=now, family=family_window(model or agent.model), strategy=strategy
    )


@dataclass(frozen=True)
class AutoAssignment:
    agent: Agent
    assigned: bool
    subscription_id: int | None
    selection: Selection | None


@transaction.atomic
def assignment_auto(*, agent: Agent, now: datetime) -> AutoAssignment:
    """Give an unassigned agent the best-ranked subscription of its provider.

    The same ranker as a walk: the first ranked candidate, else the first
    last-resort one (a skip-listed plan may recover; no plan at all never does).
    Compare-and-set: an agent that got a subscription meanwhile is left alone.
    Returns what happened; changes only the agent's subscription.
    """
    if agent.subscription_id is not None:
        return AutoAssignment(agent, False, agent.subscription_id, None)
    selection = rank_alternatives(agent=agent, now=now)
    order = selection.order()
    if not order:
        return AutoAssignment(agent, False, None, selection)
    choice = order[0]
    claimed = Agent.objects.filter(pk=agent.pk, subscription__isnull=True).update(
        subscription_id=choice
    )
    if claimed != 1:
        agent.refresh_from_db(fields=["subscription"])
        return AutoAssignment(agent, False, agent.subscription_id, selection)
    agent.subscription_id = choice
    logger.info(
        "agent %s auto-assigned to subscription %d: %s", agent.name, choice, selection.reason()
    )
    return AutoAssignment(agent, True, choice, selection)
