"""Small fleets and multi-request turns for the fleet tests and the profile, built in
memory with the trace's dataclasses (the v2 shape: a turn's requests, plans added
and removed, per-model key prices)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from bench.fleet.policies import Policy, TurnResult
from bench.fleet.trace import AgentSpec, Fleet, Request, SubscriptionSpec, Trace, Turn, WindowSpec
from routing.rung import RungKind

START = datetime(2030, 1, 7, tzinfo=UTC)
SONNET = "claude-sonnet-4-5"
OPUS = "claude-opus-4-1"
BIG = 10_000_000


def plan(
    name: str,
    *,
    five_hour: int = BIG,
    five_used: int = 0,
    five_reset: timedelta = timedelta(hours=5),
    weekly_reset: timedelta = timedelta(days=7),
    added_at: datetime | None = None,
    removed_at: datetime | None = None,
    paused: tuple[tuple[datetime, datetime | None], ...] = (),
) -> SubscriptionSpec:
    """A plan whose windows hold plenty unless told otherwise."""
    weekly = START + weekly_reset
    return SubscriptionSpec(
        name=name,
        plan_type="pro",
        windows={
            "five_hour": WindowSpec(five_hour, START + five_reset, five_used),
            "seven_day": WindowSpec(BIG, weekly, 0),
            "seven_day_sonnet": WindowSpec(BIG, weekly, 0),
            "seven_day_opus": WindowSpec(BIG, weekly, 0),
        },
        added_at=added_at,
        removed_at=removed_at,
        paused=paused,
    )


def fleet(*plans: SubscriptionSpec, agents: tuple[AgentSpec, ...], **extra: object) -> Fleet:
    return Fleet(
        name="t",
        start=START,
        end=START + timedelta(days=7),
        subscriptions=plans,
        agents=agents,
        **extra,  # type: ignore[arg-type]
    )


def turn(agent: str, at: timedelta, *tokens: int, gap: float = 10.0) -> Turn:
    """A turn of ``agent`` at ``START + at``: one request per ``tokens``, ``gap`` s apart."""
    requests = tuple(Request(i * gap, n) for i, n in enumerate(tokens))
    return Turn(START + at, agent, sum(tokens), "api", requests=requests)


def split(one: Turn, parts: int, gap_seconds: float) -> Turn:
    """``one`` as ``parts`` requests ``gap_seconds`` apart, its tokens shared out
    (the first requests take the remainder), the total unchanged."""
    count = max(1, min(parts, one.tokens))
    share, extra = divmod(one.tokens, count)
    requests = tuple(
        Request(i * gap_seconds, share + (1 if i < extra else 0)) for i in range(count)
    )
    return replace(one, requests=requests)


def split_trace(trace: Trace, parts: int = 8, gap_seconds: float = 5.0) -> Trace:
    """Every turn of ``trace`` split by ``split``."""
    return replace(trace, turns=tuple(split(t, parts, gap_seconds) for t in trace.turns))


def drive(policy: Policy, one: Turn) -> TurnResult:
    """Run one turn of ``policy`` to its end on its world's clock (no other events)."""
    run = policy.run_turn(one, one.at)
    try:
        while True:
            policy.world.now(next(run))
    except StopIteration as ended:
        return ended.value


def rungs(result: TurnResult) -> list[str]:
    """Per served request, the plan's name or "key"."""
    return ["key" if s.rung.kind is RungKind.API_KEY else s.rung.name for s in result.served]
