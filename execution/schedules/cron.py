"""Pure rules for schedules: whether a cron expression is valid, when it fires next.

No Django, no Redis: each takes ``now`` (or the instant to start from), so the tests
read as tables. Whether an exhausted turn parks is the planner's rule
(``routing/planner/park.py``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter  # type: ignore[import-untyped]  # no stubs shipped

# Five fields, minute first: croniter also accepts a sixth (seconds) and a seventh
# (year) field, which would let a schedule fire more often than once a minute.
CRON_FIELDS = 5


class InvalidCron(ValueError):
    """The expression is not a 5-field cron expression croniter can evaluate."""


def cron_check(expression: str) -> str:
    """Return the expression, normalised (single spaces); raise InvalidCron if bad."""
    fields = expression.split()
    if len(fields) != CRON_FIELDS:
        raise InvalidCron(
            f"A schedule needs 5 cron fields (minute hour day month weekday), got {len(fields)}."
        )
    normalised = " ".join(fields)
    if not croniter.is_valid(normalised):
        raise InvalidCron(f"{normalised!r} is not a valid cron expression.")
    try:
        # is_valid accepts some expressions that can never fire (e.g. 30 February).
        next_fire_after(normalised, after=datetime(2000, 1, 1, tzinfo=UTC))
    except (ValueError, KeyError) as exc:
        raise InvalidCron(f"{normalised!r} never fires.") from exc
    return normalised


def next_fire_after(expression: str, *, after: datetime) -> datetime:
    """The first fire instant strictly after ``after`` (UTC, aware).

    Strictly after: a schedule that fired at 12:00 must not fire at 12:00 again, so an
    instant exactly on a fire time yields the following one.
    """
    start = after.astimezone(UTC)
    found = croniter(expression, start).get_next(datetime)
    assert isinstance(found, datetime)
    return found.astimezone(UTC)


def fire_plan(expression: str, *, due_at: datetime, now: datetime) -> datetime:
    """The next ``next_fire_at`` for a schedule fired now whose due instant was ``due_at``.

    The next fire time after ``now``, not after ``due_at``: after an outage (beat down
    for an hour) the schedule fires once for the whole gap, not once per missed period.
    """
    return next_fire_after(expression, after=max(due_at, now))


# The day-level window a cron's smallest gap is measured over: a leap year from its
# first day, so every month length, every weekday of every date and 29 February occur.
_GAP_WINDOW_START = datetime(2024, 1, 1, tzinfo=UTC)
_GAP_WINDOW_DAYS = 366
_MINUTES_PER_DAY = 24 * 60


def _expanded(values: list[Any], full: range) -> list[int]:
    return list(full) if values == ["*"] else sorted(int(v) for v in values)


def cron_smallest_gap(expression: str) -> timedelta | None:
    """The shortest time between two consecutive fires of a valid 5-field cron, or None
    when it fires at most once in the window.

    Pure; exact, and cheap for every pattern: the minute and hour fields fire the same
    times on every firing day, so the gap is the smaller of the shortest gap between two
    of those times in one day and the shortest hop from a firing day's last time to the
    next firing day's first. The firing days are walked with croniter over a leap year
    (at most 367 steps), which covers every day-of-month, month and weekday combination.
    """
    minute, hour, *_ = croniter(expression).expanded
    times = sorted(
        h * 60 + m for h in _expanded(hour, range(24)) for m in _expanded(minute, range(60))
    )
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    days_only = " ".join(["0", "0", *expression.split()[2:]])
    days = croniter(days_only, _GAP_WINDOW_START - timedelta(minutes=1))
    end = _GAP_WINDOW_START + timedelta(days=_GAP_WINDOW_DAYS)
    previous: datetime | None = None
    while (day := days.get_next(datetime)) < end + timedelta(days=1):
        if previous is not None:
            hop_days = (day - previous).days
            gaps.append(hop_days * _MINUTES_PER_DAY - times[-1] + times[0])
        previous = day
        if day >= end:
            break
    return timedelta(minutes=min(gaps)) if gaps else None
