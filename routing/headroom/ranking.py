"""In which order a walk should try the candidates, by what their readings say.

Pure, no Django and no Redis. Two strategies: banded (by 10-point band of fullness,
then agent count) and balanced (by the reset-aware score of ``balance.py``). A fresh
refusal is dropped; a skip-listed candidate ranks only when readmitted
(``recovery.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from math import floor, inf, log
from typing import NamedTuple

from routing.headroom.balance import ADMISSION_FLOOR, balance_at
from routing.headroom.candidates import Candidate
from routing.headroom.classification import (
    NO_EVIDENCE,
    Headroom,
    Instants,
    Tier,
    headroom_held,
    instants_at,
)
from routing.headroom.precomputed import precomputed_of
from routing.headroom.reading import Reading
from routing.headroom.recovery import Verdict, readmission_verdict
from routing.headroom.refusal_windows import refusal_blocks

BANDED, BALANCED = "banded", "balanced"  # trinity.models.RoutingStrategy's values
# Balanced: admitted plans whose scores fall in one band this factor wide rank as equals.
SPREAD = 1.25
_LOG_SPREAD = log(SPREAD)


class Ranked(NamedTuple):
    """One ranked candidate. ``score`` and ``limiting_window`` are the balanced
    strategy's (``balance_of``); the banded strategy leaves them None."""

    candidate: Candidate
    tier: Tier
    headroom: Headroom
    readmitted: Verdict | None = None
    score: float | None = None
    limiting_window: str | None = None


@dataclass(frozen=True, slots=True)
class Ranking:
    """Ranked candidates first, then skip-listed ones nothing readmitted (DB order).

    ``dropped`` holds fresh refusals: they are not tried at all.
    """

    ranked: tuple[Ranked, ...]
    last_resort: tuple[Candidate, ...]
    dropped: tuple[Candidate, ...]


# Hot-path aliases: ranking 10,000 candidates runs the loop below 10,000 times.
_MEASURED, _UNKNOWN, _REFUSING = Tier.MEASURED, Tier.UNKNOWN, Tier.REFUSING
_READMITTED_BY_RESET = Verdict.WINDOW_RESET
_new = tuple.__new__


class _Groups(NamedTuple):
    """The candidates sorted into the groups the order is made of.

    Banded: measured candidates in (band, agent count) buckets, each kept in the given
    order (a handful of keys to sort instead of thousands of candidates). Balanced:
    the admitted and the not admitted measured candidates, each beside a list of their
    -score sort keys (parallel lists, not pairs: 10,000 pair tuples outlive the loop
    and cost the garbage collector more than the sort).
    """

    measured: dict[tuple[int, int], list[Ranked]]
    scored: list[Ranked]
    scored_keys: list[float]
    spent: list[Ranked]
    spent_keys: list[float]
    unknown: list[Ranked]
    last_resort: list[Candidate]
    dropped: list[Candidate]

    def ranking(self) -> Ranking:
        ordered: list[Ranked] = []
        # Balanced: admitted by score, unknown, then the not admitted by score (a
        # nearly spent plan is still a plan before the key). Banded: the buckets in
        # order, then unknown. A strategy leaves the other's groups empty.
        ordered.extend(_by_key(self.scored, self.scored_keys))
        for key in sorted(self.measured):
            ordered.extend(self.measured[key])
        ordered.extend(self.unknown)
        ordered.extend(_by_key(self.spent, self.spent_keys))
        return Ranking(tuple(ordered), tuple(self.last_resort), tuple(self.dropped))


def _spread_band(score: float) -> float:
    """The band of an admitted plan's score (bands a factor of ``SPREAD`` wide: 1.25**k
    up to 1.25**(k+1)); within a band the load-balance order decides (fewest
    agents first). Agents that leave a refusing plan together then spread over the
    plans that score about as well instead of all landing on the single best one
    (each arrival raises that plan's agent count), the way a ramp admits a herd a
    few at a time."""
    return floor(log(score) / _LOG_SPREAD) if score > 0 else -inf


def _by_key(items: list[Ranked], keys: list[float]) -> Iterator[Ranked]:
    # Stable: equal keys keep the order given (the load-balance order).
    return map(items.__getitem__, sorted(range(len(keys)), key=keys.__getitem__))


def rank_candidates(
    candidates: Sequence[Candidate],
    readings: Mapping[int, Reading],
    *,
    now: datetime,
    max_age: timedelta,
    family: str | None = None,
    strategy: str = BANDED,
) -> Ranking:
    """Order ``candidates`` (given in load-balance order) by what their readings say.

    Banded (the default): measured candidates come first, by 10-point band of their
    fullness, then by agent count; unknown ones follow in the order given.
    Balanced: measured candidates the hysteresis admits (strictly above 5 %
    remaining) come first by score (``balance_of``), highest first, equal scores in
    the order given; then unknown ones; then measured ones not admitted, by score
    (a nearly spent plan is still a plan before the key). A fresh refusal is dropped;
    a skip-listed candidate is ranked only if readmitted, and a ``window_reset``
    readmission ranks as unknown (its figures describe the window that reset). A
    refusal that named another family's window does not skip-list (``refusal_blocks``).
    """
    groups = _groups(
        candidates, readings, instants_at(now, max_age), now, family, strategy == BALANCED
    )
    return groups.ranking()


def _groups(
    candidates: Sequence[Candidate],
    readings: Mapping[int, Reading],
    instants: Instants,
    now: datetime,
    family: str | None,
    balanced: bool,
) -> _Groups:
    groups = _Groups({}, [], [], [], [], [], [], [])
    measured, scored, scored_keys, spent, spent_keys, unknown, last_resort, dropped = groups
    now_us, five_hour_since = instants[0], instants[2]
    max_age = now_us - instants[1]
    get = readings.get
    for candidate in candidates:
        reading = get(candidate[0])
        if reading is None:
            headroom = NO_EVIDENCE
        else:
            figures = reading._precomputed
            if figures is None:
                figures = precomputed_of(reading)
            # ``headroom_held``'s lookup inlined: a call per candidate saved.
            held = figures[9].get(family)
            if held is not None and held[0] <= now_us < held[1] and held[2] == max_age:
                headroom = held[3]
            else:
                headroom = headroom_held(reading, figures, instants, family)
        tier = headroom[0]
        if tier is _REFUSING:
            dropped.append(candidate)
            continue
        verdict = None
        if candidate[3] is not None and refusal_blocks(candidate[5], family):
            verdict = readmission_verdict(
                reading, headroom, now, candidate[3], family, candidate[4]
            )
            if verdict is None:
                last_resort.append(candidate)
                continue
        if tier is not _MEASURED or verdict is _READMITTED_BY_RESET:
            unknown.append(_new(Ranked, (candidate, _UNKNOWN, headroom, verdict, None, None)))
        elif balanced:
            score, remaining, limiting = balance_at(figures, now_us, five_hour_since, family)
            ranked = _new(Ranked, (candidate, _MEASURED, headroom, verdict, score, limiting))
            if remaining > ADMISSION_FLOOR:
                scored.append(ranked)
                scored_keys.append(-_spread_band(score))
            else:
                spent.append(ranked)
                spent_keys.append(-score)
        else:
            key = (headroom[6] or 0, candidate[2])  # a measured band is never None
            bucket = measured.get(key)
            ranked = _new(Ranked, (candidate, _MEASURED, headroom, verdict, None, None))
            if bucket is None:
                measured[key] = [ranked]
            else:
                bucket.append(ranked)
    return groups
