"""The held-out families: valid traces, drawn within their ranges, a function of the seed."""

from __future__ import annotations

import io
from collections import Counter

import pytest

from bench.fleet.families import (
    CONTEXT_CAP,
    FAMILY_NAMES,
    LIMITS,
    RANGES,
    SOLD,
    demand_ratio,
    holdout_trace,
    trace_named,
)
from bench.fleet.generate import MAX_REQUESTS as MAX_TURN_REQUESTS
from bench.fleet.trace import LIST_PRICES, Trace, trace_dump, trace_parse

SEED = 20_261_205
# Two of each family: enough to meet every feature, a few seconds to draw.
COUNT = 2 * len(FAMILY_NAMES)


def _dumped(trace: Trace) -> str:
    buffer = io.StringIO()
    trace_dump(trace, buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def drawn() -> list[Trace]:
    return [holdout_trace(SEED, index) for index in range(COUNT)]


def test_each_trace_reads_back_as_written(drawn: list[Trace]):
    for trace in drawn:
        text = _dumped(trace)
        assert trace_parse(text.splitlines()) == trace
        assert _dumped(trace_parse(text.splitlines())) == text


def test_the_families_take_turns_and_names_say_family_index_and_seed(drawn: list[Trace]):
    for index, trace in enumerate(drawn):
        family = FAMILY_NAMES[index % len(FAMILY_NAMES)]
        assert trace.fleet.name == f"{family}-{index:02d}-s{SEED}"
        assert trace.fleet.seed == SEED
        assert trace.fleet.description.startswith(f"held-out {family}:")


def test_plans_are_3_to_12_of_1_to_3_sold_sizes(drawn: list[Trace]):
    for trace in drawn:
        plans = trace.fleet.subscriptions
        assert RANGES.plans[0] <= len(plans) <= RANGES.plans[1]
        sizes = {p.plan_type for p in plans}
        assert sizes <= set(SOLD)
        assert RANGES.sizes[0] <= len(sizes) <= RANGES.sizes[1]
        assert sum(p.added_at is None for p in plans) >= 3
        untouched = [p for p in plans if p.revoked_at is None and p.removed_at is None]
        assert len(untouched) >= 2


def test_agents_number_5_to_60_and_each_starts_on_a_plan(drawn: list[Trace]):
    for trace in drawn:
        agents = trace.fleet.agents
        assert RANGES.agents[0] <= len(agents) <= RANGES.agents[1]
        assert all(a.subscription is not None for a in agents)


def test_demand_is_what_was_drawn_against_what_the_plans_can_serve(drawn: list[Trace]):
    low, high = RANGES.demand
    for trace in drawn:
        # Tokens are whole numbers: the ratio lands within rounding of the draw.
        assert low - 0.01 <= demand_ratio(trace) <= high + 0.01, trace.fleet.name


def test_sizes_stay_within_the_limits(drawn: list[Trace]):
    for trace in drawn:
        assert LIMITS.min_turns // 2 <= len(trace.turns) <= LIMITS.turns
        assert sum(len(t.parts) for t in trace.turns) <= LIMITS.requests
        assert all(len(t.parts) <= MAX_TURN_REQUESTS for t in trace.turns)
        assert all(t.ends_at < trace.fleet.end for t in trace.turns)


def test_multi_request_turns_read_a_growing_prefix_one_request_turns_none(drawn: list[Trace]):
    for trace in drawn:
        weights = trace.fleet.cache_weights
        if all(not t.requests for t in trace.turns):
            assert not trace.fleet.cached  # version 1's shape: one request, no cache
            continue
        assert RANGES.cache_read[0] <= weights["read"] <= RANGES.cache_read[1]
        assert RANGES.cache_write[0] <= weights["write"] <= RANGES.cache_write[1]
        for turn in trace.turns:
            cached = [r.cached for r in turn.requests]
            assert cached[0] >= RANGES.prefix[0]
            assert all(c <= CONTEXT_CAP for c in cached)
            assert cached == sorted(cached)


def test_the_draws_meet_every_feature(drawn: list[Trace]):
    features: Counter[str] = Counter()
    for trace in drawn:
        fleet = trace.fleet
        features["revoked"] += any(p.revoked_at for p in fleet.subscriptions)
        features["added"] += any(p.added_at for p in fleet.subscriptions)
        features["removed"] += any(p.removed_at for p in fleet.subscriptions)
        features["one request"] += all(not t.requests for t in trace.turns)
        features["multi request"] += any(len(t.requests) > 1 for t in trace.turns)
        features["list prices"] += fleet.key_prices == LIST_PRICES
        features["flat price"] += not fleet.key_prices
        flat_low, flat_high = RANGES.flat_price
        assert fleet.key_prices or flat_low <= fleet.key_usd_per_mtok <= flat_high
        features["opus"] += any("opus" in trace.model_of(t) for t in trace.turns)
        features["schedule"] += any(t.trigger == "schedule" for t in trace.turns)
    missing = [
        f
        for f in (
            "revoked",
            "added",
            "removed",
            "one request",
            "multi request",
            "list prices",
            "flat price",
            "opus",
            "schedule",
        )
        if not features[f]
    ]
    assert not missing


def test_the_same_seed_draws_the_same_traces_and_another_seed_does_not(drawn: list[Trace]):
    assert _dumped(holdout_trace(SEED, 3)) == _dumped(drawn[3])
    assert _dumped(trace_named(drawn[4].fleet.name)) == _dumped(drawn[4])
    other = holdout_trace(SEED + 1, 3)
    assert other.fleet.name != drawn[3].fleet.name
    assert other.turns != drawn[3].turns


@pytest.mark.parametrize("name", ["flat-01-s5", "steady", "flat-00-sx", "nope-00-s5"])
def test_a_name_of_another_shape_is_refused(name: str):
    with pytest.raises(ValueError, match="held-out|family"):
        trace_named(name)
