"""Spend budgets of the platform key: the rules, the ledger's admission and settlement.

The key bills per token, so what it may bill is capped per agent and fleet-wide, per
UTC day and per UTC month (null means no cap). The fleet's caps are the admin's
(``SystemSettings.key_budget_*``); an agent's cap per period is the tighter of its
owner's and the admin's for it (``Agent.key_budget_*``, ``Agent.admin_key_budget_*``;
``policy.tightest_budget``), so an owner may narrow but never widen what the admin
set. A key turn is admitted against the agent's and the fleet's caps alike. The ledger
(``KeySpend``) keeps one row per scope and period.

- **Admission** (``key_spend_reserve``): before a key rung is sent, one conditional
  update per ledger row reserves the turn's estimated cost, admitted only while
  ``spent + reserved < budget``; every row or none, in one transaction. Concurrent
  turns therefore cannot both pass a read-then-check: the last one admitted found the
  budget not yet reached, so what is reserved and spent overshoots it by at most one
  turn's estimate.
- **The turn's remaining budget** (``Reservation.remaining_usd``): the tightest of the
  capped budgets' ``limit - spent - what other turns reserved``, sent with the key to
  the agent server, whose forwarder refuses the key's requests once the turn's metered
  spend reaches it: the cap holds where the key is spent, not only at admission.
- **Settlement** (``key_spend_settle``): the reservation moves to ``spent`` at the
  turn's metered cost (nothing when the key refused it). Exactly-once is the caller's
  conditional update on the execution's reservation (``execution/key_reservation.py``).
- **Closed** (``key_budget_closed``): the cheap read the walk consults so it does not
  offer a key rung whose budget is consumed.

The rules (``period_start``, ``period_end``, ``budget_admits``, ``applicable_budgets``)
are pure: no Django, no I/O, ``now`` is an argument.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest

from agents.models import Agent
from routing.policy import tightest_budget
from routing.providers import (
    ANTHROPIC,
    OPENAI,
    fleet_key_budgets,
    fleet_scope,
    is_fleet_scope,
    key_slot,
    platform_key_configured,
)
from subscriptions.models import FLEET_SCOPE, BudgetPeriod, KeySpend
from trinity.models import SystemSettings
from trinity.notifications import notification_send

logger = logging.getLogger(__name__)

ZERO = Decimal("0")
PERIODS = (BudgetPeriod.DAY, BudgetPeriod.MONTH)
PERIOD_WORD = {BudgetPeriod.DAY: "daily", BudgetPeriod.MONTH: "monthly"}


# The rules (pure)


def agent_scope(agent_id: int) -> str:
    return f"agent:{agent_id}"


def period_start(period: str, *, now: datetime) -> date:
    """The first day (UTC) of the budget period ``now`` falls in."""
    today = now.astimezone(UTC).date()
    return today if period == BudgetPeriod.DAY else today.replace(day=1)


def period_end(period: str, *, now: datetime) -> datetime:
    """The instant (UTC) the period ``now`` falls in ends and its budget reopens."""
    start = period_start(period, now=now)
    if period == BudgetPeriod.DAY:
        end = start + timedelta(days=1)
    else:
        end = (start.replace(day=28) + timedelta(days=4)).replace(day=1)
    return datetime.combine(end, time.min, tzinfo=UTC)


def budget_admits(*, spent: Decimal, reserved: Decimal, limit: Decimal) -> bool:
    """Whether a budget admits one more key turn: only while spent + reserved < limit.

    A budget hit exactly (spent == limit) is closed; just under admits, and the turn
    admitted there may overshoot it by its own cost (the bound the ledger promises).
    """
    return spent + reserved < limit


@dataclass(frozen=True, slots=True)
class Budget:
    """One cap that applies to a key turn: whose (scope), per what (period), how much."""

    scope: str
    period: str
    limit_usd: Decimal
    # Who it caps, in the operator's words: "agent 'bot'" or "the fleet".
    owner: str
    # Which key it caps, in the operator's words.
    key: str = "platform key"

    def describe(self) -> str:
        """``the platform key's daily budget of $5.00 for agent 'bot'``."""
        word = PERIOD_WORD.get(BudgetPeriod(self.period), self.period)
        if is_fleet_scope(self.scope):
            return f"the {self.key}'s fleet-wide {word} budget of ${self.limit_usd:.2f}"
        return f"the {self.key}'s {word} budget of ${self.limit_usd:.2f} for {self.owner}"


def applicable_budgets(
    *,
    agent_id: int,
    agent_name: str,
    agent_daily: Decimal | None,
    agent_monthly: Decimal | None,
    fleet_daily: Decimal | None,
    fleet_monthly: Decimal | None,
    provider: str = ANTHROPIC,
) -> list[Budget]:
    """The caps a key turn of this agent on ``provider``'s key is admitted against
    (null: no cap): the agent's own, and that key's fleet-wide ones (its own ledger
    scope: what one provider's key spends never counts against the other's)."""
    owner = f"agent {agent_name!r}"
    scope = agent_scope(agent_id)
    fleet = fleet_scope(provider)
    slot = key_slot(provider)
    key = slot.budget_label if slot is not None else "platform key"
    caps = (
        (scope, BudgetPeriod.DAY, agent_daily, owner),
        (scope, BudgetPeriod.MONTH, agent_monthly, owner),
        (fleet, BudgetPeriod.DAY, fleet_daily, "the fleet"),
        (fleet, BudgetPeriod.MONTH, fleet_monthly, "the fleet"),
    )
    return [Budget(s, p, cap, who, key) for s, p, cap, who in caps if cap is not None]


@dataclass(frozen=True, slots=True)
class BudgetClosed:
    """A budget that does not admit a key turn now, and why, in words for the operator."""

    budget: Budget
    spent_usd: Decimal
    reserved_usd: Decimal
    starts_on: date
    reopens_at: datetime

    @property
    def reason(self) -> str:
        """``the platform key's daily budget of $5.00 for agent 'bot' is spent``."""
        if self.spent_usd >= self.budget.limit_usd:
            return f"{self.budget.describe()} is spent"
        # Turns in flight hold the rest; a refused one gives its share back.
        return (
            f"{self.budget.describe()} is taken: ${self.spent_usd:.2f} spent and "
            f"${self.reserved_usd:.2f} reserved by key turns in flight"
        )

    @property
    def dedup_key(self) -> str:
        return f"key-budget:{self.budget.scope}:{self.budget.period}:{self.starts_on.isoformat()}"


def tightest_remaining(
    lines: Iterable[tuple[Budget, Decimal, Decimal]],
) -> tuple[Decimal, Budget] | None:
    """Of ``(budget, spent, reserved by other turns)`` lines, the least a turn may
    still spend and the budget that says so (never below zero); None without a cap."""
    tightest: tuple[Decimal, Budget] | None = None
    for budget, spent, others in lines:
        remaining = max(budget.limit_usd - spent - others, ZERO)
        if tightest is None or remaining < tightest[0]:
            tightest = (remaining, budget)
    return tightest


@dataclass(frozen=True, slots=True)
class Reservation:
    """What one admitted key turn reserved: the estimate, on which ledger rows; and the
    most it may spend (``remaining_usd``, None: no cap), named by ``remaining_of``."""

    usd: Decimal
    ledger_ids: tuple[int, ...]
    remaining_usd: Decimal | None = None
    remaining_of: str | None = None

    def as_json(self) -> dict[str, object]:
        return {"usd": str(self.usd), "ledgers": list(self.ledger_ids)}


# Selectors


def agent_caps(agent: Agent) -> tuple[Decimal | None, Decimal | None]:
    """The agent's own (daily, monthly) caps: the tighter of its owner's and the
    admin's for each period (None: no cap)."""
    return (
        tightest_budget((agent.key_budget_daily_usd, agent.admin_key_budget_daily_usd)),
        tightest_budget((agent.key_budget_monthly_usd, agent.admin_key_budget_monthly_usd)),
    )


def agent_budgets(
    *, agent: Agent, system: SystemSettings, provider: str | None = None
) -> list[Budget]:
    """The caps that apply to ``agent``'s key turns (from memory: no query): on the key
    of ``provider``, which is the agent's own (``Agent.provider``) unless given."""
    provider = provider or agent.provider
    daily, monthly = agent_caps(agent)
    fleet_daily, fleet_monthly = fleet_key_budgets(system, provider)
    return applicable_budgets(
        agent_id=agent.pk,
        agent_name=agent.name,
        agent_daily=daily,
        agent_monthly=monthly,
        fleet_daily=fleet_daily,
        fleet_monthly=fleet_monthly,
        provider=provider,
    )


def _ledger_filter(keys: Iterable[tuple[str, str, date]]) -> Q:
    query = Q(pk__in=[])
    for scope, period, starts_on in keys:
        query |= Q(scope=scope, period=period, starts_on=starts_on)
    return query


def key_budget_closed(
    *, agent: Agent, system: SystemSettings, now: datetime, provider: str | None = None
) -> BudgetClosed | None:
    """The first of ``agent``'s key budgets (on ``provider``'s key: the agent's own
    unless given) that admits no key turn now, or None.

    No cap, no query; otherwise one indexed read of at most four ledger rows. A
    period without a row has spent nothing.
    """
    return budgets_closed(agent_budgets(agent=agent, system=system, provider=provider), now=now)


def fleet_budgets(*, system: SystemSettings, provider: str) -> list[Budget]:
    """The fleet-wide caps of ``provider``'s key alone (a gateway request has no agent)."""
    daily, monthly = fleet_key_budgets(system, provider)
    return [
        b
        for b in applicable_budgets(
            agent_id=0,
            agent_name="",
            agent_daily=None,
            agent_monthly=None,
            fleet_daily=daily,
            fleet_monthly=monthly,
            provider=provider,
        )
        if is_fleet_scope(b.scope)
    ]


def budgets_closed(budgets: list[Budget], *, now: datetime) -> BudgetClosed | None:
    """The first of ``budgets`` that admits no key spend now, or None (no cap: no query)."""
    if not budgets:
        return None
    keys = {(b.scope, b.period): period_start(b.period, now=now) for b in budgets}
    rows = {
        (row.scope, row.period): row
        for row in KeySpend.objects.filter(
            _ledger_filter((s, p, d) for (s, p), d in keys.items())
        ).only("scope", "period", "spent_usd", "reserved_usd")
    }
    for budget in budgets:
        row = rows.get((budget.scope, budget.period))
        spent = row.spent_usd if row is not None else ZERO
        reserved = row.reserved_usd if row is not None else ZERO
        if not budget_admits(spent=spent, reserved=reserved, limit=budget.limit_usd):
            return BudgetClosed(
                budget,
                spent,
                reserved,
                keys[(budget.scope, budget.period)],
                period_end(budget.period, now=now),
            )
    return None


@transaction.atomic
def fleet_key_spend_add(*, provider: str, usd: Decimal, now: datetime) -> None:
    """Add ``usd`` the platform key of ``provider`` billed outside any turn (a gateway
    request, metered as it was served) to that key's fleet ledger rows."""
    if usd <= ZERO:
        return
    rows = _ledger_rows([fleet_scope(provider)], now=now)
    key_spend_settle(ledger_ids=[r.pk for r in rows], reserved=ZERO, spent=usd)


# Services


def _ledger_rows(scopes: Sequence[str], *, now: datetime) -> list[KeySpend]:
    """The ledger rows of ``scopes`` x (day, month) for now's periods, created if missing."""
    keys = [(s, p, period_start(p, now=now)) for s in scopes for p in PERIODS]
    rows = list(KeySpend.objects.filter(_ledger_filter(keys)))
    if len(rows) < len(keys):
        have = {(r.scope, r.period, r.starts_on) for r in rows}
        # ignore_conflicts: a concurrent turn may create the same period's row first.
        KeySpend.objects.bulk_create(
            [KeySpend(scope=s, period=p, starts_on=d) for s, p, d in keys if (s, p, d) not in have],
            ignore_conflicts=True,
        )
        rows = list(KeySpend.objects.filter(_ledger_filter(keys)))
    # Always locked in primary-key order, so two reservations never deadlock.
    return sorted(rows, key=lambda r: r.pk)


# No savepoint of its own: a refusal gives back what it reserved instead (below), which
# saves two round trips on every key turn.
@transaction.atomic(savepoint=False)
def key_spend_reserve(
    *,
    agent: Agent,
    system: SystemSettings,
    usd: Decimal,
    now: datetime,
    provider: str | None = None,
) -> Reservation | BudgetClosed:
    """Admit one key turn of ``agent`` on ``provider``'s key (the agent's own, unless
    given) and reserve ``usd`` for it, or say which budget is closed.

    Reserves on the agent's and that key's fleet's day and month rows (uncapped ones
    too, so the spend is known when a cap is set later). A capped row admits only while
    ``spent + reserved < budget``, checked by the UPDATE itself; if any row refuses,
    the rows already reserved are released in the same transaction (all rows or none;
    nobody saw them, their locks are held until commit). Raises only database errors.
    """
    provider = provider or agent.provider
    budgets = {
        (b.scope, b.period): b for b in agent_budgets(agent=agent, system=system, provider=provider)
    }
    rows = _ledger_rows([agent_scope(agent.pk), fleet_scope(provider)], now=now)
    for index, row in enumerate(rows):
        budget = budgets.get((row.scope, row.period))
        admitted = KeySpend.objects.filter(pk=row.pk)
        if budget is not None:
            # Evaluated on the row as it is when the lock is granted (Postgres
            # re-checks the condition after a concurrent update commits).
            admitted = admitted.filter(spent_usd__lt=budget.limit_usd - F("reserved_usd"))
        if admitted.update(reserved_usd=F("reserved_usd") + usd) == 1:
            continue
        assert budget is not None  # an uncapped row always admits
        if index:
            KeySpend.objects.filter(pk__in=[r.pk for r in rows[:index]]).update(
                reserved_usd=F("reserved_usd") - usd
            )
        current = KeySpend.objects.get(pk=row.pk)
        return BudgetClosed(
            budget,
            current.spent_usd,
            current.reserved_usd,
            row.starts_on,
            period_end(row.period, now=now),
        )
    return _reservation(usd, rows, budgets)


def _reservation(
    usd: Decimal, rows: list[KeySpend], budgets: dict[tuple[str, str], Budget]
) -> Reservation:
    """The admitted turn's reservation with its remaining budget, read from the rows
    as its own updates left them (locked by them until commit). No cap, no query."""
    ids = tuple(r.pk for r in rows)
    capped = {r.pk: budgets[(r.scope, r.period)] for r in rows if (r.scope, r.period) in budgets}
    if not capped:
        return Reservation(usd, ids)
    now_rows = KeySpend.objects.filter(pk__in=list(capped)).values_list(
        "pk", "spent_usd", "reserved_usd"
    )
    # What other turns hold is the row's reservation less this turn's own.
    tightest = tightest_remaining(
        (capped[pk], spent, max(reserved - usd, ZERO)) for pk, spent, reserved in now_rows
    )
    assert tightest is not None  # noqa: S101 - capped rows exist
    remaining, budget = tightest
    return Reservation(usd, ids, remaining, budget.describe())


def key_spend_settle(*, ledger_ids: Sequence[int], reserved: Decimal, spent: Decimal) -> None:
    """Move one turn's reservation off ``ledger_ids``: reserved -= ``reserved``,
    spent += ``spent``.

    The caller's transaction holds it together with the execution's conditional update
    that makes it happen once. Rows are updated in primary-key order (no deadlock with a
    reservation); ``reserved`` never goes below zero.
    """
    for pk in sorted(ledger_ids):
        KeySpend.objects.filter(pk=pk).update(
            reserved_usd=Greatest(F("reserved_usd") - reserved, ZERO),
            spent_usd=F("spent_usd") + spent,
        )


def key_budget_notify(*, closed: BudgetClosed, agent: Agent, now: datetime) -> None:
    """Tell the operator a key budget closed the key rung: once per budget per period.

    An agent's budget is told to that agent's owner; the fleet's is the admin's (its
    text names no agent: the turn that met it may be another owner's)."""
    fleet = is_fleet_scope(closed.budget.scope)
    ttl = max(int((closed.reopens_at - now).total_seconds()), 60)
    notification_send(
        kind="key_budget_closed",
        level="warning",
        title=f"{closed.budget.key[:1].upper()}{closed.budget.key[1:]} budget reached",
        body=f"{closed.reason[0].upper()}{closed.reason[1:]}; key turns are refused until "
        f"{closed.reopens_at.isoformat()}"
        + ("." if fleet else f" (turn of agent {agent.name!r})."),
        agent_name="" if fleet else agent.name,
        agent_id=None if fleet else agent.pk,
        dedup_key=closed.dedup_key,
        dedup_ttl=ttl,
        data={
            "scope": closed.budget.scope,
            "period": closed.budget.period,
            "budget_usd": str(closed.budget.limit_usd),
            "spent_usd": str(closed.spent_usd),
            "reopens_at": closed.reopens_at.isoformat(),
        },
        now=now,
    )


@dataclass(frozen=True, slots=True)
class BudgetLine:
    """One ledger row as the panel shows it: a scope's spend in the current period
    against its cap (``limit_usd`` None: no cap)."""

    scope: str
    agent_name: str
    period: str
    starts_on: date
    reopens_at: datetime
    limit_usd: Decimal | None
    spent_usd: Decimal
    reserved_usd: Decimal
    # The agent's owner (names are unique per owner only); None on a fleet line.
    agent_owner: str | None = None

    @property
    def closed(self) -> bool:
        return self.limit_usd is not None and not budget_admits(
            spent=self.spent_usd, reserved=self.reserved_usd, limit=self.limit_usd
        )

    @property
    def remaining_usd(self) -> Decimal | None:
        if self.limit_usd is None:
            return None
        return max(self.limit_usd - self.spent_usd - self.reserved_usd, ZERO)


def key_budget_lines(
    *, agents: Iterable[Agent], system: SystemSettings, now: datetime
) -> list[BudgetLine]:
    """The Anthropic key's fleet day and month (always), the OpenAI key's when that key
    is configured or capped, then each of ``agents`` that has a cap, in the current
    periods; one query for every ledger row. Writes nothing."""
    # (scope, the agent's name and owner (None on a fleet line), daily, monthly cap)
    scopes: list[tuple[str, tuple[str, str] | None, Decimal | None, Decimal | None]] = [
        (FLEET_SCOPE, None, *fleet_key_budgets(system, ANTHROPIC))
    ]
    openai_caps = fleet_key_budgets(system, OPENAI)
    if platform_key_configured(system, OPENAI) or openai_caps != (None, None):
        scopes.append((fleet_scope(OPENAI), None, *openai_caps))
    for agent in agents:
        daily, monthly = agent_caps(agent)
        if daily is not None or monthly is not None:
            named = (agent.name, agent.owner.get_username())
            scopes.append((agent_scope(agent.pk), named, daily, monthly))
    keys = [(s[0], p, period_start(p, now=now)) for s in scopes for p in PERIODS]
    rows = {(r.scope, r.period): r for r in KeySpend.objects.filter(_ledger_filter(keys))}
    lines = []
    for scope, whose, daily, monthly in scopes:
        for period, limit in ((BudgetPeriod.DAY, daily), (BudgetPeriod.MONTH, monthly)):
            row = rows.get((scope, period))
            lines.append(
                BudgetLine(
                    scope=scope,
                    agent_name=whose[0] if whose else "",
                    agent_owner=whose[1] if whose else None,
                    period=period,
                    starts_on=period_start(period, now=now),
                    reopens_at=period_end(period, now=now),
                    limit_usd=limit,
                    spent_usd=row.spent_usd if row is not None else ZERO,
                    reserved_usd=row.reserved_usd if row is not None else ZERO,
                )
            )
    return lines
