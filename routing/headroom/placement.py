"""Where an agent should run while nothing refuses, decided at a turn boundary. Pure,
no Django and no Redis.

Two rules, in this order:

1. **Expiring first.** A plan's weekly window resets whether or not it was used: what
   it has left at the reset is lost, while a plan that resets later keeps what it was
   spared. A plan whose weekly window resets within ``EXPIRING_WITHIN`` (48 h), with
   weekly headroom worth moving for (``WEEKLY_FLOOR``) and enough of its 5-hour window
   left to take one more agent (``FIVE_HOUR_RESERVE``), takes the agent when it resets
   at least ``RESETS_SOONER_BY`` (12 h) before the assignment does; of several, the one
   that resets soonest.
2. **Balanced.** Otherwise the agent moves to the alternative with the best balanced
   score (``balance.py``: remaining over the share of each window still to run, the
   tightest window deciding) when the hysteresis says so (``hysteresis.py``: strictly
   more than 20 % better, or the assignment below its floor). That keeps every plan
   on pace, so 5-hour headroom stays spread for the peaks instead of one plan's
   window being burnt early.

Hysteresis in time: an agent that moved (by placement or by a walk) stays ``DWELL``
(4 h) before placement moves it again.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

from routing.headroom.balance import Balance, balance_of
from routing.headroom.classification import FIVE_HOUR_COUNTS_FOR, Tier, classify_headroom
from routing.headroom.hysteresis import Move, hysteresis_move
from routing.headroom.reading import FIVE_HOUR, SEVEN_DAY, Reading

EXPIRING_WITHIN = timedelta(hours=48)
RESETS_SOONER_BY = timedelta(hours=12)
WEEKLY_FLOOR = 10.0  # percent of the weekly window left
FIVE_HOUR_RESERVE = 30.0  # percent of the 5-hour window left
DWELL = timedelta(hours=4)
# A settled agent is looked at for placement at most once this often: the readings
# it judges are refreshed by the sampler every 5 minutes, so a look per turn would
# mostly repeat the last one, and the ranking it costs is paid once per agent per
# interval, not per turn.
EVERY = timedelta(minutes=5)
# Placement judges at most this many alternatives (the best-ranked ones): one cache
# read of their snapshots, whatever the size of the pool.
CANDIDATES = 32


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
    """Whether placement may look for a better plan than this assignment: it has a
    balanced measure (a measured, serving reading). An assignment known nothing of
    stays; one that refuses is pre-dispatch's."""
    return balance_of(reading, now=now, max_age=max_age, family=family) is not None


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
    rank order. Expiring first, then balanced (the module's docstring); an assignment
    with no measure stays: nothing is known that a move would improve.
    """
    pool = list(candidates)
    return _expiring_first(assigned, pool, now=now, max_age=max_age, family=family) or (
        _balanced(assigned, pool, now=now, max_age=max_age, family=family)
    )


def _expiring_first(
    assigned: Reading | None,
    candidates: list[tuple[int, Reading | None]],
    *,
    now: datetime,
    max_age: timedelta,
    family: str | None,
) -> int | None:
    """The plan whose weekly headroom expires soonest, when it expires within
    ``EXPIRING_WITHIN`` and ``RESETS_SOONER_BY`` before the assignment's; ties: more of
    it left, then rank order."""
    here = standing_of(assigned, now=now, max_age=max_age, family=family)
    if here is None:
        return None
    best: tuple[int, Standing] | None = None
    for pk, reading in candidates:
        there = standing_of(reading, now=now, max_age=max_age, family=family)
        if there is None or there.weekly_resets_at - now > EXPIRING_WITHIN:
            continue
        if there.weekly_left < WEEKLY_FLOOR or there.five_hour_left < FIVE_HOUR_RESERVE:
            continue
        if best is None or (there.weekly_resets_at, -there.weekly_left) < (
            best[1].weekly_resets_at,
            -best[1].weekly_left,
        ):
            best = (pk, there)
    if best is None or best[1].weekly_resets_at + RESETS_SOONER_BY > here.weekly_resets_at:
        return None
    return best[0]


def _balanced(
    assigned: Reading | None,
    candidates: list[tuple[int, Reading | None]],
    *,
    now: datetime,
    max_age: timedelta,
    family: str | None,
) -> int | None:
    """The best-scoring alternative when the hysteresis moves the agent to it."""
    incumbent = balance_of(assigned, now=now, max_age=max_age, family=family)
    if incumbent is None:
        return None
    best: tuple[int, Balance] | None = None
    for pk, reading in candidates:
        challenger = balance_of(reading, now=now, max_age=max_age, family=family)
        if challenger is not None and (best is None or challenger.score > best[1].score):
            best = (pk, challenger)
    if best is None or hysteresis_move(incumbent, best[1]) is Move.STAY:
        return None
    return best[0]
