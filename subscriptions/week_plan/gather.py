"""What the week plan is solved from, read from the database and the cache.

Facts only, in a bounded number of round trips whatever the fleet: one query per
provider for its plans (``plan_facts.candidates_read``), one ``get_many`` of their
snapshots, one query for what each plan served in its current windows, one for the
agents, one for their turns by hour, one for what the key charged. The pure part
(``routing/plan_ahead/inputs.py``: ``demand_profile``, ``capacity_estimate``) turns
them into ``WeekInputs``; the solver (``routing.plan_ahead.solve.plan_week``) decides.

Executions are read through the relations that point at them (``Agent.executions``,
``Subscription.served_executions``): ``subscriptions`` sits below ``execution`` and
does not import it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from django.db import connections
from django.db.models import Case, DateTimeField, F, Min, Q, Sum, Value, When
from django.db.models.functions import TruncHour

from agents.models import RUNTIME_PROVIDER, Agent
from routing import providers
from routing.eligibility import Candidate
from routing.headroom.reading import FIVE_HOUR, SEVEN_DAY, Reading, ReadingStatus
from routing.headroom.windows import FAMILY_WINDOW_PREFIX, family_window, window_duration
from routing.plan_ahead.inputs import (
    HISTORY_WEEKS,
    AgentDemand,
    PlanState,
    WeekInputs,
    WindowState,
    capacity_estimate,
    demand_profile,
    nominal_capacity,
)
from subscriptions.headroom.store import snapshots_read
from subscriptions.models import HeadroomSample, Subscription
from subscriptions.plan_facts import candidates_read, fresh_for

PROVIDERS = (providers.ANTHROPIC, providers.OPENAI)
CORE = (FIVE_HOUR, SEVEN_DAY)

# The key's list price per model family, USD per million tokens (input and output
# together, as a turn of an agent spends them), when the key has not yet served that
# family: what a planned spill is priced at. None: a model of no known family.
LIST_PRICES: dict[str | None, float] = {"opus": 25.0, "sonnet": 5.0, "haiku": 5.0 / 3, None: 5.0}
MTOK = 1_000_000


def model_family(model: str) -> str | None:
    """The family a model's turns are planned as: its family window's family (``opus``,
    ``sonnet``: ``routing.headroom.windows.family_window``), else ``haiku`` for a
    haiku model, else None."""
    window = family_window(model)
    if window is not None:
        return window.removeprefix(FAMILY_WINDOW_PREFIX)
    return "haiku" if "haiku" in model.lower() else None


def _execution_model() -> Any:
    """``execution.Execution``, reached through the agent's relation (this floor may
    not import ``execution``): typed ``Any``, as its manager is not ``Model``'s."""
    return Agent._meta.get_field("executions").related_model


@dataclass(frozen=True, slots=True)
class _Plan:
    candidate: Candidate
    provider: str
    reading: Reading | None


def week_inputs_gather(*, now: datetime) -> dict[str, WeekInputs]:
    """What the week plan of each provider is solved from at ``now``: the plans that
    may serve (present, not paused, their token not known refused), with their
    windows; every agent of the provider's runtimes, with its forecast; the key's
    prices. Keyed by provider: a Claude agent never runs on a Codex plan, so each
    provider's week is its own problem. Raises only what the database raises; a cache
    that does not answer leaves every plan unread (nominal, all left)."""
    plans = _plans_read(now)
    firsts = _first_samples(plans, now)
    served = _served_in_windows(firsts, now)
    agents = _agents_read(now)
    prices = _prices_read(now)
    return {
        provider: WeekInputs(
            now=now,
            plans=tuple(
                _plan_state(
                    p,
                    served.get(p.candidate.subscription_id, {}),
                    firsts.get(p.candidate.subscription_id, {}),
                    now,
                )
                for p in plans
                if p.provider == provider
            ),
            agents=tuple(agents.get(provider, ())),
            prices={**LIST_PRICES, **prices.get(provider, {})},
        )
        for provider in PROVIDERS
    }


def _plans_read(now: datetime) -> list[_Plan]:
    """Every plan that may serve over the horizon, with its cached reading."""
    found = [(c, p) for p in PROVIDERS for c in candidates_read(provider=p, now=now)]
    snapshots = snapshots_read(c.subscription_id for c, _ in found)
    readings = snapshots.readings if snapshots.reachable else {}
    return [
        _Plan(c, provider, readings.get(c.subscription_id))
        for c, provider in found
        if not c.paused and not token_refused(c, readings.get(c.subscription_id), now)
    ]


def token_refused(candidate: Candidate, reading: Reading | None, now: datetime) -> bool:
    """Whether the provider last said no to the plan's token and nothing since says
    yes: a fresh ``invalid_token`` reading, or an auth refusal in the skip window that
    no later reading answered. A rate limit is no such fact: the plan's windows say
    when it serves again, and the solver plans around them."""
    if reading is not None and now - reading.fetched_at <= fresh_for():
        if reading.status is ReadingStatus.INVALID_TOKEN:
            return True
        refused_at = candidate.last_failure_at
        if refused_at is None or reading.fetched_at > refused_at:
            return False
    return candidate.last_failure_kind == "auth"


def _windows_of(plan: _Plan, now: datetime) -> dict[str, tuple[float | None, datetime, bool]]:
    """Each window the plan's reading names (and the core two, unread: all left), as
    (utilization, the reset of the current period, whether it was read in that
    period); a reset that passed rolls the window over to its current period."""
    windows: dict[str, tuple[float | None, datetime, bool]] = {}
    reading = plan.reading
    if reading is not None and reading.answered:
        for name, window in reading.windows.items():
            period = window_duration(name)
            if period is None or window.resets_at is None:
                continue
            resets_at, read = window.resets_at, True
            if resets_at <= now:
                # A reading of a window that since reset describes quota that no
                # longer exists: the new period starts with everything left.
                periods = (now - resets_at) // period + 1
                resets_at, read = resets_at + periods * period, False
            utilization = window.utilization if read else None
            if read and window.blocking and (utilization is None or utilization < 100):
                utilization = 100.0
            windows[name] = (utilization, resets_at, read)
    for name in CORE:
        if name not in windows:
            windows[name] = (None, now + cast("timedelta", window_duration(name)), False)
    return windows


def _plan_state(
    plan: _Plan,
    served: Mapping[str, float],
    firsts: Mapping[str, tuple[datetime, float]],
    now: datetime,
) -> PlanState:
    """The plan's windows: what is left of each, of a capacity learned from how far
    its utilization rose since the period's first sample against what the plan served
    since then (``capacity_estimate``), else the plan type's nominal."""
    candidate = plan.candidate
    states = []
    for name, (utilization, resets_at, read) in sorted(_windows_of(plan, now).items()):
        nominal = nominal_capacity(candidate.plan_type or "", name, plan.provider)
        first = firsts.get(name)
        rise = (utilization - first[1]) if read and first and utilization is not None else None
        capacity = capacity_estimate(served.get(name, 0.0), rise, nominal=nominal)
        used = min(100.0, max(0.0, utilization or 0.0))
        states.append(
            WindowState(
                name=name,
                capacity=capacity,
                left=capacity * (1 - used / 100),
                resets_at=resets_at,
                period=cast("timedelta", window_duration(name)),
            )
        )
    return PlanState(id=candidate.subscription_id, name=candidate.name, windows=tuple(states))


def _period_starts(plans: Iterable[_Plan], now: datetime) -> dict[str, dict[int, datetime]]:
    """Per window name, when each plan's current period of it began (read windows)."""
    starts: dict[str, dict[int, datetime]] = defaultdict(dict)
    for plan in plans:
        for name, (_, resets_at, read) in _windows_of(plan, now).items():
            if read:
                starts[name][plan.candidate.subscription_id] = resets_at - cast(
                    "timedelta", window_duration(name)
                )
    return starts


def _first_samples(
    plans: Iterable[_Plan], now: datetime
) -> dict[int, dict[str, tuple[datetime, float]]]:
    """Per plan and read window, the first stored sample of the window's current
    period: when it was taken and the window's utilization then. Two queries: the
    first instant per plan and window name (one aggregate), then those rows."""
    starts = _period_starts(plans, now)
    if not starts:
        return {}
    names = sorted(starts)
    firsts: dict[str, Any] = {}
    for i, name in enumerate(names):
        since = Case(
            *(When(pk=pk, then=Value(start)) for pk, start in starts[name].items()),
            default=Value(now),
            output_field=DateTimeField(),
        )
        within = Q(headroom_samples__fetched_at__gte=since, headroom_samples__status="ok")
        firsts[f"w{i}"] = Min("headroom_samples__fetched_at", filter=within)
    ids = {pk for by_plan in starts.values() for pk in by_plan}
    rows = list(Subscription.objects.filter(pk__in=ids).values("pk").annotate(**firsts))
    wanted = {(row["pk"], row[f"w{i}"]) for row in rows for i in range(len(names)) if row[f"w{i}"]}
    if not wanted:
        return {}
    match = Q()
    for pk, at in wanted:
        match |= Q(subscription_id=pk, fetched_at=at)
    samples = {
        (pk, at): windows or {}
        for pk, at, windows in HeadroomSample.objects.filter(match).values_list(
            "subscription_id", "fetched_at", "windows"
        )
    }
    found: dict[int, dict[str, tuple[datetime, float]]] = defaultdict(dict)
    for row in rows:
        for i, name in enumerate(names):
            at = row[f"w{i}"]
            utilization = (samples.get((row["pk"], at)) or {}).get(name, {}).get("utilization")
            if at is not None and utilization is not None:
                found[row["pk"]][name] = (at, float(utilization))
    return found


def _served_in_windows(
    firsts: Mapping[int, Mapping[str, tuple[datetime, float]]], now: datetime
) -> dict[int, dict[str, float]]:
    """Tokens each plan served since the first sample of each of its read windows'
    current period: one query, one sum per window name, each with that plan's own
    instant (a family window counts its family's turns only)."""
    starts: dict[str, dict[int, datetime]] = defaultdict(dict)
    for pk, by_name in firsts.items():
        for name, (at, _) in by_name.items():
            starts[name][pk] = at
    if not starts:
        return {}
    tokens = F("served_executions__input_tokens") + F("served_executions__output_tokens")
    sums: dict[str, Any] = {}
    for i, (name, by_plan) in enumerate(sorted(starts.items())):
        since = Case(
            *(When(pk=pk, then=Value(start)) for pk, start in by_plan.items()),
            default=Value(now),
            output_field=DateTimeField(),
        )
        within = Q(served_executions__created_at__gte=since, served_executions__created_at__lt=now)
        if name.startswith(FAMILY_WINDOW_PREFIX):
            family = name.removeprefix(FAMILY_WINDOW_PREFIX)
            within &= Q(served_executions__model__icontains=family) | Q(
                served_executions__model="", served_executions__agent__model__icontains=family
            )
        sums[f"w{i}"] = Sum(tokens, filter=within)
    names = sorted(starts)
    ids = {pk for by_plan in starts.values() for pk in by_plan}
    rows = Subscription.objects.filter(pk__in=ids).values("pk").annotate(**sums)
    return {
        row["pk"]: {name: float(row[f"w{i}"] or 0) for i, name in enumerate(names)} for row in rows
    }


def _agents_read(now: datetime) -> dict[str, list[AgentDemand]]:
    """Every agent, by its runtime's provider, with its demand forecast: one query for
    the agents, one for their turns of the last ``HISTORY_WEEKS`` by hour."""
    agents = list(
        Agent.objects.only(
            "id", "name", "runtime", "model", "subscription_id", "last_switch"
        ).order_by("id")
    )
    hours: dict[int, list[tuple[datetime, float]]] = defaultdict(list)
    for agent_id, hour, tokens in _hourly_rows(now):
        if tokens:
            hours[agent_id].append((hour, float(tokens)))
    found: dict[str, list[AgentDemand]] = defaultdict(list)
    for agent in agents:
        found[RUNTIME_PROVIDER.get(agent.runtime, providers.ANTHROPIC)].append(
            AgentDemand(
                id=agent.pk,
                name=agent.name,
                family=model_family(agent.model),
                assigned=agent.subscription_id,
                hourly=demand_profile(hours.get(agent.pk, ()), now=now),
                moved_at=agent.last_move()[0],
            )
        )
    return found


def _hourly_rows(now: datetime) -> list[tuple[int, datetime, Any]]:
    """Every agent's tokens per hour over the last ``HISTORY_WEEKS``: one query. On
    Postgres its rows are fetched without Django's converters (psycopg's own aware
    timestamps): at 200 agents' three weeks, 42,000 rows, they were five sixths of the
    query's time."""
    queryset = (
        _execution_model()
        .objects.filter(
            agent_id__isnull=False,
            created_at__gte=now - timedelta(weeks=HISTORY_WEEKS),
            created_at__lt=now,
        )
        .annotate(hour=TruncHour("created_at"))
        .values("agent_id", "hour")
        .annotate(tokens=Sum(F("input_tokens") + F("output_tokens")))
        .values_list("agent_id", "hour", "tokens")
    )
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return list(queryset)
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    # DATE_TRUNC of the UTC wall clock: a timestamp without its zone, which is UTC.
    return [(pk, hour.replace(tzinfo=UTC), tokens) for pk, hour, tokens in rows]


def _prices_read(now: datetime) -> dict[str, dict[str | None, float]]:
    """What the key charged per million tokens, by provider and family, over the last
    ``HISTORY_WEEKS`` (one query): a family it served nothing of keeps its list price."""
    rows = (
        _execution_model()
        .objects.filter(
            served_by_kind="api_key",
            cost_usd__isnull=False,
            agent_id__isnull=False,
            created_at__gte=now - timedelta(weeks=HISTORY_WEEKS),
            created_at__lt=now,
        )
        .values_list("agent__runtime", "model", "agent__model")
        .annotate(cost=Sum("cost_usd"), tokens=Sum(F("input_tokens") + F("output_tokens")))
        .values_list("agent__runtime", "model", "agent__model", "cost", "tokens")
    )
    totals: dict[tuple[str, str | None], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for runtime, model, agent_model, cost, tokens in rows:
        key = (
            RUNTIME_PROVIDER.get(runtime, providers.ANTHROPIC),
            model_family(model or agent_model or ""),
        )
        totals[key][0] += float(cost or 0)
        totals[key][1] += float(tokens or 0)
    prices: dict[str, dict[str | None, float]] = defaultdict(dict)
    for (provider, family), (cost, tokens) in totals.items():
        if cost > 0 and tokens > 0:
            prices[provider][family] = cost * MTOK / tokens
    return prices
