"""Where an agent should run while nothing refuses: on the plan whose weekly headroom
expires soonest. Pure, no Django and no Redis.

A plan's weekly window resets whether or not it was used: what it has left at the
reset is lost, while a plan that resets later keeps what it was spared. So at a turn
boundary an agent moves to a plan whose weekly window resets clearly sooner than its
own (``RESETS_SOONER_BY``), provided that plan still has weekly headroom worth moving
for (``WEEKLY_FLOOR``) and enough of its 5-hour window left to take one more agent
through a peak (``FIVE_HOUR_RESERVE``). The reserve is also what spreads a move: once
the target's 5-hour figure drops under it, no more agents follow. Hysteresis: an agent
that moved (by placement or by a walk) stays ``DWELL`` before placement moves it
again, so a plan whose 5-hour window refused it is not flipped back to at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

from subscriptions.headroom.classification import FIVE_HOUR_COUNTS_FOR, Tier, classify_headroom
from subscriptions.headroom.reading import FIVE_HOUR, SEVEN_DAY, Reading

RESETS_SOONER_BY = timedelta(hours=12)
WEEKLY_FLOOR = 10.0  # percent of the weekly window left
FIVE_HOUR_RESERVE = 50.0  # percent of the 5-hour window left
DWELL = timedelta(hours=2)


class Standing(NamedTuple):
    """What placement reads of one serving plan: when its weekly headroom expires, how
    much of it is left, and how much of its 5-hour window (percent)."""

    weekly_resets_at: datetime
    weekly_left: float
    five_hour_left: float


def standing_of(
    reading: Reading | None, *, now: datetime, max_age: timedelta, family: str | None
) -> Standing | None:
    """The standing of a measured, serving reading; None when the reading is no such
    evidence (absent, stale, refusing) or names no weekly reset.

    The weekly figure is the fuller of ``seven_day`` and the turn's family window (the
    one that binds), with that window's reset. A reading whose window reset since is
    no standing (its figures describe the window that ended: ``classify_headroom``);
    a 5-hour figure older than ``FIVE_HOUR_COUNTS_FOR`` says too little and reads as
    below the reserve.
    """
    if reading is None:
        return None
    if classify_headroom(reading, now=now, max_age=max_age, family=family).tier is not (
        Tier.MEASURED
    ):
        return None
    weekly = [
        w
        for name in (SEVEN_DAY, family)
        if name and (w := reading.windows.get(name)) is not None and w.utilization is not None
    ]
    if not weekly:
        return None
    binding = max(weekly, key=lambda w: w.utilization or 0.0)
    if binding.resets_at is None or binding.resets_at <= now:
        return None
    five = reading.windows.get(FIVE_HOUR)
    if five is None or five.utilization is None:
        five_left = 100.0
    elif now - reading.fetched_at > FIVE_HOUR_COUNTS_FOR:
        five_left = 0.0
    else:
        five_left = 100.0 - five.utilization
    return Standing(binding.resets_at, 100.0 - (binding.utilization or 0.0), five_left)


def placeable(
    reading: Reading | None, *, now: datetime, max_age: timedelta, family: str | None
) -> bool:
    """Whether placement could move an agent off this assignment: it has a standing
    whose weekly window resets more than ``RESETS_SOONER_BY`` from now. The cheap test
    on the assignment's own reading that spares every other turn the ranking."""
    here = standing_of(reading, now=now, max_age=max_age, family=family)
    return here is not None and here.weekly_resets_at - now > RESETS_SOONER_BY


def settled(last_moved_at: datetime | None, *, now: datetime) -> bool:
    """Whether an agent has stayed where it is long enough to be placed again."""
    return last_moved_at is None or now - last_moved_at >= DWELL


def placement_pick(
    assigned: Reading | None,
    candidates: Iterable[tuple[int, Reading | None]],
    *,
    now: datetime,
    max_age: timedelta,
    family: str | None,
) -> int | None:
    """The subscription the agent should move to at this turn boundary, or None.

    ``candidates``: the measured alternatives (subscription id, stored reading) in
    rank order. Of those with ``WEEKLY_FLOOR`` and ``FIVE_HOUR_RESERVE`` left, the one
    whose weekly headroom expires soonest (ties: more of it left, then rank order),
    and only when it resets ``RESETS_SOONER_BY`` before the assignment does. An
    assignment with no standing (no usable reading) stays: nothing is known that a
    move would improve.
    """
    here = standing_of(assigned, now=now, max_age=max_age, family=family)
    if here is None:
        return None
    best: tuple[int, Standing] | None = None
    for pk, reading in candidates:
        there = standing_of(reading, now=now, max_age=max_age, family=family)
        if there is None or there.weekly_left < WEEKLY_FLOOR:
            continue
        if there.five_hour_left < FIVE_HOUR_RESERVE:
            continue
        if best is None or (there.weekly_resets_at, -there.weekly_left) < (
            best[1].weekly_resets_at,
            -best[1].weekly_left,
        ):
            best = (pk, there)
    if best is None or best[1].weekly_resets_at + RESETS_SOONER_BY > here.weekly_resets_at:
        return None
    return best[0]
