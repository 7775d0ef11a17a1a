"""The seeded traces: each a function of its seed, and a team week what it promises."""

from __future__ import annotations

import io
import statistics
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from bench.fleet.generate import (
    GENERATORS,
    MAX_REQUESTS,
    SEEDS,
    TRACES_DIR,
    TURN_CAP,
    ZONES,
    plan_capacity,
    small,
    team_week,
)
from bench.fleet.trace import (
    LIST_PRICES,
    Fleet,
    SubscriptionSpec,
    Trace,
    Turn,
    WindowSpec,
    trace_dump,
)

START = datetime(2030, 1, 7, tzinfo=UTC)
OPUS, SONNET, HAIKU = "claude-opus-4-1", "claude-sonnet-4-5", "claude-haiku-4-5"


def _dumped(trace: Trace) -> str:
    buffer = io.StringIO()
    trace_dump(trace, buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def kept() -> dict[str, Trace]:
    return {name: generate(SEEDS[name]) for name, generate in GENERATORS.items()}


@pytest.fixture(scope="module")
def week(kept: dict[str, Trace]) -> Trace:
    return kept["team-1"]


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_each_kept_trace_is_its_seeds_output(name: str, kept: dict[str, Trace]):
    """The files in the repository are what the generator writes for their seed."""
    written = (TRACES_DIR / f"{name}.jsonl").read_text(encoding="utf-8")
    assert _dumped(kept[name]) == written


def test_the_same_seed_writes_the_same_trace_and_another_seed_does_not():
    assert _dumped(team_week(7)) == _dumped(team_week(7))
    assert team_week(7).turns != team_week(8).turns
    assert small(5) == small(5)
    assert small(5).turns != small(6).turns


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_each_kept_trace_fits_the_budget_and_outgrows_its_plans(name: str, kept):
    """At most 3,000 turns and 25,000 requests (the bench runs eight policies on each),
    turns of many requests, and more demand than the plans can serve, not far more."""
    trace = kept[name]
    requests = sum(len(t.parts) for t in trace.turns)
    assert len(trace.turns) <= 3_000 and requests <= 25_000
    assert requests / len(trace.turns) > 3
    assert 1.0 < sum(t.tokens for t in trace.turns) / plan_capacity(trace.fleet) < 1.5
    assert trace.fleet.key_prices == LIST_PRICES
    assert any(t.model == OPUS for t in trace.turns)
    # Every request carries its prompt prefix, several times its fresh tokens.
    assert trace.fleet.cached and all(r.cached for t in trace.turns for r in t.parts)
    cached = sum(r.cached for t in trace.turns for r in t.parts)
    assert 3 < cached / sum(t.tokens for t in trace.turns) < 12


def _weekly(
    used: int,
    reset_day: float,
    *,
    added_at: datetime | None = None,
    revoked_at: datetime | None = None,
    removed_at: datetime | None = None,
) -> SubscriptionSpec:
    """A plan of 100 weekly tokens, ``used`` of them, resetting ``reset_day`` days in."""
    windows = {"seven_day": WindowSpec(100, START + timedelta(days=reset_day), used)}
    return SubscriptionSpec(
        "p", "pro", windows, revoked_at=revoked_at, added_at=added_at, removed_at=removed_at
    )


@pytest.mark.parametrize(
    ("plan", "tokens"),
    [
        (_weekly(30, 2), 70 + 100),  # what is left, then the whole week again
        (_weekly(30, 2, revoked_at=START + timedelta(days=1)), 70),
        (_weekly(30, 2, revoked_at=START + timedelta(days=2)), 70),  # revoked at its reset
        (_weekly(30, 2, removed_at=START + timedelta(days=2, seconds=1)), 170),
        (_weekly(0, 10, added_at=START + timedelta(days=3)), 100),  # added fresh
        (
            _weekly(0, 4, added_at=START + timedelta(days=3), removed_at=START + timedelta(days=3)),
            0,
        ),
    ],
)
def test_the_plan_capacity_is_what_is_left_and_each_reset_while_the_plan_serves(
    plan: SubscriptionSpec, tokens: int
):
    fleet = Fleet("t", START, START + timedelta(days=7), (plan,), ())
    assert plan_capacity(fleet) == tokens


def _people(trace: Trace, zone: str) -> list[Turn]:
    return [t for t in trace.turns if t.agent.startswith(f"{zone}-") and t.trigger != "schedule"]


def _local_hour(turn: Turn, zone: str) -> float:
    local = turn.at + timedelta(hours=ZONES[zone])
    return local.hour + local.minute / 60


def test_the_two_offices_are_two_daily_peaks_six_hours_apart(week):
    medians = {}
    for zone in ZONES:
        turns = [
            t for t in _people(week, zone) if (t.at + timedelta(hours=ZONES[zone])).weekday() < 5
        ]
        hours = Counter(int(_local_hour(t, zone)) for t in turns)
        # Most of it on local office hours, with a lunch dip.
        assert sum(hours[h] for h in range(9, 18)) > 0.8 * len(turns), zone
        assert hours[12] < 0.6 * min(hours[11], hours[13]), zone
        medians[zone] = statistics.median(t.at.hour + t.at.minute / 60 for t in turns)
    assert 5 <= medians["us"] - medians["eu"] <= 7


def test_weekends_are_quieter_but_not_empty(week):
    days = Counter(t.at.weekday() for zone in ZONES for t in _people(week, zone))
    weekday = statistics.mean(days[d] for d in range(5))
    for day in (5, 6):
        assert 0 < days[day] < 0.2 * weekday


def test_design_hours_run_on_opus(week):
    """A Sonnet agent's turn is overridden to Opus mostly in 09-11 local."""
    agents = {a.name: a for a in week.fleet.agents}
    share = {True: [0, 0], False: [0, 0]}
    for zone in ZONES:
        for turn in _people(week, zone):
            if agents[turn.agent].model == SONNET:
                counts = share[9 <= _local_hour(turn, zone) < 11]
                counts[0] += turn.model == OPUS
                counts[1] += 1
    assert share[True][0] / share[True][1] > 0.35
    assert share[False][0] / share[False][1] < 0.1
    # An override names another model than the agent's.
    assert all(t.model != agents[t.agent].model for t in week.turns if t.model)


def test_bots_run_on_their_cron(week):
    by_agent: dict[str, list[Turn]] = {}
    for turn in week.turns:
        by_agent.setdefault(turn.agent, []).append(turn)
    ci = by_agent["ci-fix"]
    assert len(ci) == 7 * 24 and {(t.at.minute, t.trigger) for t in ci} == {(17, "schedule")}
    assert week.fleet.agent("ci-fix").model == HAIKU
    nightly = by_agent["nightly"]
    assert Counter((t.at.date(), t.at.hour, t.at.minute) for t in nightly) == Counter(
        {((week.fleet.start + timedelta(days=d)).date(), 2, 0): 2 for d in range(7)}
    )
    chats = [t.tokens for zone in ZONES for t in _people(week, zone)]
    assert statistics.median(t.tokens for t in nightly) > 10 * statistics.median(chats)
    assert {t.trigger for t in by_agent["reviewer"]} == {"agent"}


def test_turns_overlap_across_agents_and_within_one(week):
    """A person's agent's cron sweep runs while they chat with it."""
    last: dict[str, Turn] = {}
    overlaps: set[tuple[str, str]] = set()
    for turn in week.turns:
        before = last.get(turn.agent)
        if before is not None and turn.at <= before.ends_at:
            overlaps.add((before.trigger, turn.trigger))
        if before is None or turn.ends_at > before.ends_at:
            last[turn.agent] = turn
    assert {("schedule", "chat"), ("chat", "schedule")} & overlaps
    # Across agents: a turn starting while another's runs is the rule, not the exception.
    latest_end, started_during = week.fleet.start, 0
    for turn in week.turns:
        started_during += turn.at < latest_end
        latest_end = max(latest_end, turn.ends_at)
    assert started_during > 0.2 * len(week.turns)


def test_a_turn_is_a_loop_of_requests_heavy_tailed_and_capped(week):
    lengths = [len(t.parts) for t in week.turns]
    assert min(lengths) == 1 and max(lengths) <= MAX_REQUESTS and max(lengths) >= 20
    gaps = [
        b.offset - a.offset for t in week.turns for a, b in zip(t.parts, t.parts[1:], strict=False)
    ]
    assert min(gaps) >= 2 and max(gaps) <= 40
    tokens = sorted(t.tokens for t in week.turns)
    assert tokens[-1] <= TURN_CAP and tokens[-1] > 30 * statistics.median(tokens)
    # No clip at a round number: the heaviest turns all differ.
    assert len(set(tokens[-5:])) == 5


def test_the_team_has_mixed_plans_one_revoked_one_added_one_removed(week):
    fleet = week.fleet
    kinds = Counter(p.plan_type for p in fleet.subscriptions)
    assert kinds["max-20x"] == 2 and 2 <= kinds["max-5x"] <= 3 and 1 <= kinds["pro"] <= 2
    start, end = fleet.start, fleet.end
    revoked = [p for p in fleet.subscriptions if p.revoked_at is not None]
    added = [p for p in fleet.subscriptions if p.added_at is not None]
    removed = [p for p in fleet.subscriptions if p.removed_at is not None]
    assert len(revoked) == len(added) == len(removed) == 1
    assert start + timedelta(days=1) < revoked[0].revoked_at < added[0].added_at < end
    assert added[0].windows["seven_day"].used == 0
    assert not any(a.subscription == added[0].name for a in fleet.agents)
    present = [p for p in fleet.subscriptions if p.added_at is None]
    assert len({p.windows["seven_day"].first_reset.weekday() for p in present}) == len(present)
    assert all(0 < p.windows["seven_day"].used < p.windows["seven_day"].capacity for p in present)
    assert 20 <= len(fleet.agents) <= 30
