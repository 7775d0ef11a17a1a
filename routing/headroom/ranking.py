"""In which order a walk should try the plans ``admit`` lets through, by what their
readings say.

Pure, no Django and no Redis. Every candidate is judged first (``eligibility``: the
one verdict; a plan excluded there is never ranked, and one refused in the skip window
is kept as a last resort). Two strategies order the admitted ones: banded (by
10-point band of fullness, then agent count) and balanced (by the reset-aware score
of ``balance.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from math import floor, inf, log
from typing import NamedTuple

from routing.eligibility import Admission, Candidate, Excluded, Judged, Reason
from routing.headroom.balance import ADMISSION_FLOOR, balance_at
from routing.headroom.classification import Headroom, Tier
from routing.headroom.reading import Reading
from routing.headroom.recovery import Verdict

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
    """The admitted candidates in order, then the ones refused in the skip window that
    nothing readmitted (the last resort, in load-balance order). ``excluded``: every
    candidate ``admit`` kept out, with its verdict (the last resort among them)."""

    ranked: tuple[Ranked, ...]
    last_resort: tuple[Candidate, ...]
    excluded: tuple[Judged, ...]

    @property
    def dropped(self) -> tuple[Candidate, ...]:
        """The candidates a fresh reading says refuse (never tried)."""
        return dropped_of(self.excluded)


# Excluded because a fresh reading refuses: not even a last resort.
_READING_REFUSES = frozenset({Reason.REFUSING, Reason.FAMILY_BLOCKED})


def dropped_of(excluded: tuple[Judged, ...]) -> tuple[Candidate, ...]:
    """Of ``excluded``, the candidates a fresh reading says refuse."""
    return tuple(
        j.candidate
        for j in excluded
        if j.verdict.reason in _READING_REFUSES and not j.verdict.last_resort
    )


# Hot-path aliases: ranking 10,000 candidates runs the loop below 10,000 times.
_MEASURED = Tier.MEASURED
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
    excluded: list[Judged]

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
        return Ranking(tuple(ordered), tuple(self.last_resort), tuple(self.excluded))


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
    admission: Admission,
    *,
    strategy: str = BANDED,
) -> Ranking:
    """Judge ``candidates`` (given in load-balance order) with ``admission`` and order
    the admitted ones by what their readings say.

    Banded (the default): measured candidates come first, by 10-point band of their
    fullness, then by agent count; unknown ones follow in the order given.
    Balanced: measured candidates the hysteresis admits (strictly above 5 %
    remaining) come first by score (``balance_of``), highest first, equal scores in
    the order given; then unknown ones; then measured ones not admitted, by score
    (a nearly spent plan is still a plan before the key). A ``window_reset``
    readmission ranks as unknown (its figures describe the window that reset).
    """
    groups = _Groups({}, [], [], [], [], [], [], [])
    measured, scored, scored_keys, spent, spent_keys, unknown, last_resort, excluded = groups
    instants = admission.instants
    now_us, five_hour_since = instants[0], instants[2]
    family, balanced = admission.family, strategy == BALANCED
    judge, get = admission.alternative, readings.get
    for candidate in candidates:
        reading = get(candidate[0])
        verdict = judge(candidate, reading)
        if isinstance(verdict, Excluded):
            excluded.append(_new(Judged, (candidate, verdict)))
            if verdict[2]:  # a last resort
                last_resort.append(candidate)
            continue
        tier, headroom, readmitted = verdict[0], verdict[1], verdict[2]
        if tier is not _MEASURED:
            unknown.append(_new(Ranked, (candidate, tier, headroom, readmitted, None, None)))
        elif balanced:
            figures = reading._precomputed  # type: ignore[union-attr]  # measured: read
            score, remaining, limiting = balance_at(figures, now_us, five_hour_since, family)
            ranked = _new(Ranked, (candidate, tier, headroom, readmitted, score, limiting))
            if remaining > ADMISSION_FLOOR:
                scored.append(ranked)
                scored_keys.append(-_spread_band(score))
            else:
                spent.append(ranked)
                spent_keys.append(-score)
        else:
            key = (headroom[6] or 0, candidate[2])  # a measured band is never None
            bucket = measured.get(key)
            ranked = _new(Ranked, (candidate, tier, headroom, readmitted, None, None))
            if bucket is None:
                measured[key] = [ranked]
            else:
                bucket.append(ranked)
    return groups.ranking()
