"""The retention tasks drain a backlog larger than one batch (trinity/retention.py)."""

from __future__ import annotations

from collections.abc import Callable

from trinity.retention import drain


def _batches(sizes: list[int]) -> tuple[list[int], Callable[[], int]]:
    calls: list[int] = []

    def prune() -> int:
        calls.append(1)
        return sizes[len(calls) - 1]

    return calls, prune


def test_a_backlog_drains_until_a_batch_comes_back_short() -> None:
    calls, prune = _batches([5, 5, 2, 5])
    assert drain(prune, batch=5, budget_seconds=60) == 12
    assert len(calls) == 3


def test_nothing_due_is_one_query() -> None:
    calls, prune = _batches([0, 5])
    assert drain(prune, batch=5, budget_seconds=60) == 0
    assert len(calls) == 1


def test_the_budget_ends_a_long_drain_after_the_batch_in_hand() -> None:
    calls, prune = _batches([5, 5, 5])
    assert drain(prune, batch=5, budget_seconds=0) == 5
    assert len(calls) == 1
