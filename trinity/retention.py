"""Draining a table's backlog past its retention, one bounded batch at a time."""

from __future__ import annotations

import time
from collections.abc import Callable


def drain(prune_batch: Callable[[], int], *, batch: int, budget_seconds: float) -> int:
    """Call ``prune_batch`` (deletes at most ``batch`` rows, returns how many) until a
    batch comes back short or ``budget_seconds`` have passed; returns the total.

    Each batch is its own statement, so no lock is held long; looping means a backlog
    larger than one batch an hour (a busy fleet's events, a year of audit entries
    coming due at once) still drains instead of growing without end.
    """
    total = 0
    started = time.monotonic()
    while True:
        deleted = prune_batch()
        total += deleted
        if deleted < batch or time.monotonic() - started >= budget_seconds:
            return total
