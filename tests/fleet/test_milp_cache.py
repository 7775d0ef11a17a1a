"""The lower bound and the prompt cache: a request is written wherever it goes once
its session has been quiet longer than the cache's TTL."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from bench.fleet.cache import TTL_SECONDS
from bench.fleet.cells import may_be_warm, requests_of
from bench.fleet.milp import lower_solve
from bench.fleet.trace import Request, Turn
from tests.fleet.test_bounds import START, plan, trace_of


def _trace(gaps: list[float], agents: str = "hhhh"):
    """One-request turns with a cached prefix, each ``gap`` seconds after the one
    before; no plan has room, so the key takes all."""
    at, turns = START, []
    for gap, agent in zip(gaps, agents, strict=False):
        at += timedelta(seconds=gap)
        turns.append(Turn(at, agent, 10, "api", requests=(Request(0.0, 10, 1000),)))
    trace = trace_of((plan(five_hour=0),), turns)
    return replace(trace, fleet=replace(trace.fleet, key_prices={"haiku": 1e6}))


@pytest.mark.parametrize(
    ("gaps", "agents", "warm"),
    [
        ([0, 60], "hh", [False, True]),
        ([0, TTL_SECONDS], "hh", [False, True]),  # the TTL's edge is still warm
        ([0, TTL_SECONDS + 1], "hh", [False, False]),
        ([0, 60], "hs", [False, False]),  # another session's cache is not this one's
        ([0, 0], "hh", [True, True]),  # the same instant: either may be sent first
        ([0, 200, 200], "hhh", [False, True, True]),
    ],
)
def test_a_request_may_be_warm_only_within_the_ttl_of_its_sessions_last(gaps, agents, warm):
    assert may_be_warm(requests_of(_trace(gaps, agents))) == warm


def test_the_bound_bills_a_request_after_a_quiet_spell_written():
    trace = _trace([0, 60, TTL_SECONDS + 60])
    fleet, requests = trace.fleet, requests_of(trace)
    expected = sum(
        fleet.key_usd(r.model, r.request, warm=w)
        for r, w in zip(requests, [False, True, False], strict=True)
    )

    assert lower_solve(trace).usd == pytest.approx(expected, rel=1e-6)
