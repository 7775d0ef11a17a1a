"""The trace format: what is written reads back the same, and bad lines are named."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pytest

from bench.fleet.generate import GENERATORS, SEEDS, TRACES_DIR, small
from bench.fleet.trace import (
    PLAN_CAPACITY,
    TraceError,
    trace_dump,
    trace_parse,
    trace_read,
    trace_write,
)


def test_a_trace_round_trips_through_the_format(tmp_path: Path):
    trace = small()
    path = tmp_path / "small.jsonl"
    trace_write(trace, path)
    assert trace_read(path) == trace
    again = tmp_path / "again.jsonl"
    trace_write(trace_read(path), again)
    assert again.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_each_kept_trace_is_its_seeds_output(name: str):
    """The files in the repository are what the generator writes for their seed."""
    kept = (TRACES_DIR / f"{name}.jsonl").read_text(encoding="utf-8")
    buffer = io.StringIO()
    trace_dump(GENERATORS[name](SEEDS[name]), buffer)
    assert buffer.getvalue() == kept


def test_the_same_seed_writes_the_same_trace_and_another_seed_does_not():
    assert small(5) == small(5)
    assert small(5).turns != small(6).turns


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
    fleet = {
        "type": "fleet",
        "version": 1,
        "start": "2030-01-07T00:00:00+00:00",
        "end": "2030-01-08T00:00:00+00:00",
        "subscriptions": [],
        "agents": [{"name": "x", "model": "claude-haiku-4-5", "subscription": None}],
    }
    with pytest.raises(TraceError, match=rf"line 2.*{message}"):
        trace_parse([json.dumps(fleet), json.dumps(line)])


def test_a_trace_must_start_with_its_fleet():
    with pytest.raises(TraceError, match="line 1"):
        trace_parse(['{"type": "turn"}'])
