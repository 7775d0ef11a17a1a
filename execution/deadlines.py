"""A turn's time: the budget it may use, and the deadline the reaper holds it to."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from agents.client import TURN_TIMEOUT_MARGIN
from execution.models import Execution

# A row is reaped (``worker_lost``) only once even the last HTTP wait of its turn is
# over: the turn's budget, the client's margin, and slack for finishing the row.
DEADLINE_SLACK = timedelta(seconds=TURN_TIMEOUT_MARGIN + 30)


def turn_timeout(requested: float | None) -> float:
    """The turn's budget: what the caller asked for, else the default, never past the max."""
    return min(
        float(requested or settings.TRINITY_TURN_TIMEOUT_SECONDS),
        float(settings.TRINITY_TURN_TIMEOUT_MAX_SECONDS),
    )


def budget_end(execution: Execution) -> datetime:
    """The last instant the turn may use: its deadline less the reaper's slack."""
    assert execution.deadline is not None  # noqa: S101 - every created turn has one
    return execution.deadline - DEADLINE_SLACK
