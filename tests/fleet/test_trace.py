"""The trace format: what is written reads back the same, and bad lines are named."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.fleet.generate import small, team_week
from bench.fleet.trace import (
    DEFAULT_CACHE_WEIGHTS,
    PLAN_CAPACITY,
    AgentSpec,
    Fleet,
    Request,
    SubscriptionSpec,
    Trace,
    TraceError,
    Turn,
    WindowSpec,
    trace_dump,
    trace_parse,
    trace_read,
    trace_write,
)
from simulator.state import DEFAULT_CAPACITY

START = datetime(2030, 1, 7, tzinfo=UTC)


def test_a_trace_round_trips_through_the_format(tmp_path: Path):
    trace = small()
    path = tmp_path / "small.jsonl"
    trace_write(trace, path)
    assert trace_read(path) == trace
    again = tmp_path / "again.jsonl"
    trace_write(trace_read(path), again)
    assert again.read_bytes() == path.read_bytes()


def _dumped(trace: Trace) -> str:
    buffer = io.StringIO()
    trace_dump(trace, buffer)
    return buffer.getvalue()


def _without_cache(trace: Trace) -> Trace:
    """``trace`` with no prompt-cache field: what a version-2 file holds."""
    turns = tuple(
        replace(t, requests=tuple(replace(r, cached=0) for r in t.requests)) for t in trace.turns
    )
    return Trace(replace(trace.fleet, cache_weights=dict(DEFAULT_CACHE_WEIGHTS)), turns)


def test_a_version_2_trace_gives_its_bytes_back():
    """Plans added, revoked and removed, the key's prices, turns of many requests."""
    written = _dumped(_without_cache(team_week(101)))
    fleet = json.loads(written.splitlines()[0])
    assert fleet["version"] == 2 and "cache" not in fleet
    assert {"added_at", "removed_at", "revoked_at"} <= {
        k for s in fleet["subscriptions"] for k, v in s.items() if v is not None
    }
    assert _dumped(trace_parse(written.splitlines())) == written


def test_a_generated_trace_is_version_3_and_gives_its_bytes_back():
    trace = team_week(101)
    written = _dumped(trace)
    fleet = json.loads(written.splitlines()[0])
    assert fleet["version"] == 3 and fleet["cache"] == trace.fleet.cache_weights
    assert len(json.loads(written.splitlines()[1])["requests"][0]) == 3
    assert trace_parse(written.splitlines()) == trace
    assert _dumped(trace_parse(written.splitlines())) == written


def test_a_turn_with_requests_reads_back_as_written():
    fleet = dict(FLEET, version=2, key_prices={"opus": 25.0, "haiku": 1.5})
    turn = {**TURN, "tokens": 30, "requests": [[0, 10], [2.5, 5], [2.5, 15]]}
    trace = trace_parse([json.dumps(fleet), json.dumps(turn)])
    read = trace.turns[0]
    assert read.requests == (Request(0.0, 10), Request(2.5, 5), Request(2.5, 15))
    assert read.parts == read.requests and read.ends_at == read.at + timedelta(seconds=2.5)
    assert trace.fleet.key_prices == {"opus": 25.0, "haiku": 1.5}
    assert trace.fleet.key_price("claude-opus-4-1") == 25.0
    assert trace.fleet.key_price("claude-sonnet-4-5") == 5.0  # not listed: the blended price
    lines = _dumped(trace).splitlines()
    # Whole seconds are written as integers, so a written file reads back to itself.
    assert '"requests":[[0,10],[2.5,5],[2.5,15]]' in lines[1]
    assert _dumped(trace_parse(lines)).splitlines() == lines


def test_a_turn_may_leave_its_tokens_to_its_requests():
    turn = {k: v for k, v in TURN.items() if k != "tokens"} | {"requests": [[0, 4], [3, 6]]}
    trace = trace_parse([json.dumps(dict(FLEET, version=2)), json.dumps(turn)])
    assert trace.turns[0].tokens == 10


def test_a_turns_last_request_may_fall_one_second_before_the_end():
    turn = dict(TURN, at="2030-01-07T23:00:00Z", tokens=2, requests=[[0, 1], [3_599, 1]])
    trace = trace_parse([json.dumps(dict(FLEET, version=2)), json.dumps(turn)])
    assert trace.turns[0].ends_at == trace.fleet.end - timedelta(seconds=1)


def test_a_version_1_file_reads_as_before():
    """The objects a v1 line gives, spelled out; written again it is version 2."""
    windows = {
        "five_hour": {"capacity": 100, "resets_at": "2030-01-07T02:00:00+00:00", "used": 7},
        "seven_day": {"capacity": 1000, "resets_at": "2030-01-09T00:00:00+00:00", "used": 70},
    }
    fleet = dict(
        FLEET,
        name="v1",
        seed=3,
        key_usd_per_mtok=4,
        subscriptions=[
            {
                "name": "p",
                "provider": "anthropic",
                "plan_type": "max-20x",
                "revoked_at": "2030-01-07T12:00:00+00:00",
                "windows": windows,
            }
        ],
        agents=[{"name": "x", "model": "claude-haiku-4-5", "subscription": "p"}],
    )
    turn = dict(TURN, model="claude-opus-4-1", trigger="schedule")
    trace = trace_parse([json.dumps(fleet), json.dumps(turn)])
    week = START + timedelta(days=7)
    expected = Trace(
        Fleet(
            name="v1",
            start=START,
            end=START + timedelta(days=1),
            subscriptions=(
                SubscriptionSpec(
                    "p",
                    "max-20x",
                    {
                        "five_hour": WindowSpec(100, START + timedelta(hours=2), 7),
                        "seven_day": WindowSpec(1000, START + timedelta(days=2), 70),
                        "seven_day_sonnet": WindowSpec(DEFAULT_CAPACITY["seven_day_sonnet"], week),
                        "seven_day_opus": WindowSpec(DEFAULT_CAPACITY["seven_day_opus"], week),
                    },
                    revoked_at=START + timedelta(hours=12),
                ),
            ),
            agents=(AgentSpec("x", "claude-haiku-4-5", "p"),),
            key_usd_per_mtok=4.0,
            seed=3,
        ),
        (Turn(START + timedelta(hours=1), "x", 1, "schedule", "claude-opus-4-1"),),
    )
    assert trace == expected
    assert trace_parse(_dumped(trace).splitlines()) == expected


def test_a_plan_added_later_has_its_windows_from_then():
    added = "2030-01-07T10:00:00+00:00"
    plan: dict[str, Any] = {
        "name": "late",
        "plan_type": "pro",
        "added_at": added,
        "removed_at": "2030-01-07T20:00:00+00:00",
        # A reading from before it was added: rolled forward from added_at.
        "windows": {"five_hour": {"resets_at": "2030-01-07T09:00:00+00:00", "used": 50}},
    }
    trace = trace_parse([json.dumps(dict(FLEET, version=2, subscriptions=[plan]))])
    late = trace.fleet.subscriptions[0]
    at = START + timedelta(hours=10)
    assert late.added_at == at and late.removed_at == START + timedelta(hours=20)
    assert late.windows["five_hour"] == WindowSpec(
        PLAN_CAPACITY["pro"]["five_hour"], START + timedelta(hours=14), 0
    )
    assert late.windows["seven_day"].first_reset == at + timedelta(days=7)
    assert [late.present(at - timedelta(seconds=1)), late.present(at)] == [False, True]
    assert not late.present(START + timedelta(hours=20))


def test_what_a_line_leaves_out_has_its_default():
    fleet = {
        "type": "fleet",
        "version": 1,
        "start": "2030-01-07T00:00:00+00:00",
        "end": "2030-01-08T00:00:00+00:00",
        "subscriptions": [
            {
                "name": "p",
                "plan_type": "pro",
                "windows": {
                    # An old reading: its window reset long ago, usage forgotten.
                    "five_hour": {"utilization": 90.0, "resets_at": "2030-01-06T21:00:00Z"},
                    "seven_day": {"utilization": 50.0, "resets_at": "2030-01-09T00:00:00Z"},
                },
            }
        ],
        "agents": [{"name": "x", "model": "claude-haiku-4-5", "subscription": "p"}],
    }
    turn = {"type": "turn", "at": "2030-01-07T01:00:00Z", "agent": "x", "tokens": 10}
    trace = trace_parse([json.dumps(fleet), json.dumps(turn)])
    windows = trace.fleet.subscriptions[0].windows
    start = trace.fleet.start
    assert windows["five_hour"].first_reset == start + timedelta(hours=2)
    assert windows["five_hour"].used == 0
    assert windows["seven_day"].used == PLAN_CAPACITY["pro"]["seven_day"] // 2
    assert windows["seven_day_opus"].first_reset == start + timedelta(days=7)
    assert windows["seven_day_opus"].capacity == PLAN_CAPACITY["pro"]["seven_day_opus"]
    assert trace.turns[0].trigger == "api"
    assert trace.fleet.key_usd_per_mtok == 5.0


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"type": "turn", "at": "2030-01-07T01:00:00Z", "agent": "nobody", "tokens": 1}, "agent"),
        ({"type": "turn", "at": "2030-01-07T01:00:00", "agent": "x", "tokens": 1}, "timezone"),
        ({"type": "turn", "at": "2030-01-09T01:00:00Z", "agent": "x", "tokens": 1}, "outside"),
        ({"type": "turn", "at": "2030-01-07T01:00:00Z", "agent": "x", "tokens": 0}, "tokens"),
        (
            {
                "type": "turn",
                "at": "2030-01-07T01:00:00Z",
                "agent": "x",
                "tokens": 1,
                "trigger": "x",
            },
            "trigger",
        ),
    ],
)
def test_a_bad_turn_line_is_named(line: dict[str, object], message: str):
    with pytest.raises(TraceError, match=rf"line 2.*{message}"):
        trace_parse([json.dumps(FLEET), json.dumps(line)])


FLEET: dict[str, Any] = {
    "type": "fleet",
    "version": 1,
    "start": "2030-01-07T00:00:00+00:00",
    "end": "2030-01-08T00:00:00+00:00",
    "subscriptions": [],
    "agents": [{"name": "x", "model": "claude-haiku-4-5", "subscription": None}],
}
TURN: dict[str, Any] = {"type": "turn", "at": "2030-01-07T01:00:00Z", "agent": "x", "tokens": 1}


@pytest.mark.parametrize(
    ("requests", "tokens", "message"),
    [
        ([], 1, "non-empty list"),
        ({"0": 1}, 1, "non-empty list"),
        ([[0, 1, 2]], 1, r"requests\[0\]: a cached count is a version-3 field"),
        ([[0, 1, 2, 3]], 1, r"requests\[0\]: expected \[offset_seconds, tokens\]"),
        ([5], 5, r"requests\[0\]: expected"),
        ([[1, 5]], 5, r"requests\[0\]: offsets start at 0"),
        ([[0, 5], [9, 5], [4, 5]], 15, r"requests\[2\]: offsets start at 0 and never decrease"),
        ([[0, 5], [-1, 5]], 10, r"requests\[1\]: the offset must be seconds >= 0"),
        ([[0, 5], ["3", 5]], 10, r"requests\[1\]: the offset"),
        ([[0, 5], [float("nan"), 5]], 10, r"requests\[1\]: the offset must be seconds >= 0"),
        ([[0, 5], [3, 0]], 5, r"requests\[1\].tokens"),
        ([[0, 5], [3, 2.5]], 5, r"requests\[1\].tokens"),
        ([[0, 5], [3, 5]], 11, "is not its requests' sum 10"),
        ([[0, 5], [3, 5]], 0, "tokens"),
        # 23 h after the start, then 3,600 s: the trace ends at 24 h.
        ([[0, 5], [3_600, 5]], 10, "the last request is not before the trace's end"),
    ],
)
def test_a_bad_request_list_is_named(requests: Any, tokens: int, message: str):
    turn = dict(TURN, at="2030-01-07T23:00:00Z", tokens=tokens, requests=requests)
    with pytest.raises(TraceError, match=rf"line 2.*{message}"):
        trace_parse([json.dumps(dict(FLEET, version=2)), json.dumps(turn)])


def test_a_version_1_file_may_not_carry_requests():
    turn = dict(TURN, requests=[[0, 1]])
    with pytest.raises(TraceError, match=r"line 2.requests: a version-2 field"):
        trace_parse([json.dumps(FLEET), json.dumps(turn)])


PLAN: dict[str, Any] = {"name": "p", "plan_type": "pro"}


@pytest.mark.parametrize(
    ("fleet", "message"),
    [
        ({"version": 4}, "unsupported version 4"),
        ({"version": 2, "cache": {"read": 0.1, "write": 1.25}}, "a version-3 field"),
        ({"version": 3, "cache": {"read": 0.1}}, r"cache: expected"),
        ({"version": True}, "unsupported version True"),
        ({"key_prices": {"opus": 1.0}}, r"key_prices: a version-2 field in a version-1"),
        ({"subscriptions": [dict(PLAN, added_at=FLEET["start"])]}, r"\]\.added_at: a version-2"),
        ({"subscriptions": [dict(PLAN, removed_at=FLEET["start"])]}, r"removed_at: a version-2"),
        ({"version": 2, "key_prices": {"gpt": 1.0}}, r"key_prices: unknown model family 'gpt'"),
        ({"version": 2, "key_prices": {"opus": -1}}, r"key_prices\.opus: expected a price >= 0"),
        ({"version": 2, "key_prices": {"opus": "1"}}, r"key_prices\.opus: expected a price"),
        ({"version": 2, "key_prices": {"haiku": float("inf")}}, r"key_prices\.haiku: expected"),
        ({"version": 2, "key_prices": [1.0]}, r"key_prices: expected an object"),
        ({"version": 2, "key_prices": None}, r"key_prices: expected an object"),
        (
            {"version": 2, "subscriptions": [dict(PLAN, added_at="2030-01-08T00:00:00Z")]},
            r"subscriptions\[0\]\.added_at: outside the trace's \[start, end\)",
        ),
        (
            {"version": 2, "subscriptions": [dict(PLAN, removed_at="2030-01-06T23:00:00Z")]},
            r"removed_at: outside",
        ),
        (
            {
                "version": 2,
                "subscriptions": [
                    dict(PLAN, added_at="2030-01-07T10:00Z", removed_at="2030-01-07T10:00Z")
                ],
            },
            r"subscriptions\[0\]\.removed_at: not after the plan's added_at",
        ),
        (
            {
                "version": 2,
                "subscriptions": [
                    dict(PLAN, added_at="2030-01-07T10:00Z", revoked_at="2030-01-07T09:59Z")
                ],
            },
            r"subscriptions\[0\]\.revoked_at: before the plan's added_at",
        ),
        (
            {
                "version": 2,
                "subscriptions": [
                    dict(
                        PLAN,
                        added_at="2030-01-07T10:00Z",
                        windows={"five_hour": {"resets_at": "2030-01-07T15:01Z"}},
                    )
                ],
            },
            r"five_hour\.resets_at: more than one window length after 2030-01-07 10:00",
        ),
        (
            {
                "version": 2,
                "subscriptions": [dict(PLAN, added_at="2030-01-07T10:00Z")],
                "agents": [{"name": "x", "model": "claude-haiku-4-5", "subscription": "p"}],
            },
            r"agents\[0\]: 'p' is not registered at the start",
        ),
    ],
)
def test_a_bad_fleet_line_is_named(fleet: dict[str, Any], message: str):
    with pytest.raises(TraceError, match=rf"line 1.*{message}"):
        trace_parse([json.dumps(FLEET | fleet)])


def test_a_trace_must_start_with_its_fleet():
    with pytest.raises(TraceError, match="line 1"):
        trace_parse(['{"type": "turn"}'])
