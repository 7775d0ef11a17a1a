"""``Agent.last_move``: what placement and the walk's way back read of the last switch."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agents.models import Agent

AT = datetime(2030, 1, 7, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("record", "move"),
    [
        ({"from": 3, "to": 4, "at": AT.isoformat()}, (AT, 3)),
        ({}, (None, None)),  # never switched
        ({"from": None, "to": 4, "at": AT.isoformat()}, (AT, None)),
        ({"from": "3", "at": "yesterday"}, (None, None)),  # unreadable: nothing is made up
        ({"from": True, "at": AT.isoformat()}, (AT, None)),
        ([], (None, None)),
    ],
)
def test_the_last_move_is_read_from_the_last_switch(record: object, move: tuple) -> None:
    assert Agent(name="bot", last_switch=record).last_move() == move
