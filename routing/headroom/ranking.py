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
from itertools import compress, repeat
from math import floor, log
from operator import gt, itemgetter, neg, not_, truediv
from typing import Any

from routing.eligibility import Admission, Admitted, Candidate, Judged, Reason
from routing.headroom.balance import ADMISSION_FLOOR
from routing.headroom.classification import Tier
from routing.headroom.reading import Reading

BANDED, BALANCED = "banded", "balanced"  # trinity.models.RoutingStrategy's values
# Balanced: admitted plans whose scores fall in one band this factor wide rank as equals.
SPREAD = 1.25
_LOG_SPREAD = log(SPREAD)


# A ranked plan is its admitted verdict (``eligibility.Admitted``): the candidate, its
# tier and headroom, why it was readmitted, and under the balanced strategy its score
# and the window that set it (None under banded).
Ranked = Admitted


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


def _by_key(items: list[Ranked], keys: list[Any]) -> Iterator[Ranked]:
    # Stable: equal keys keep the order given (the load-balance order).
    return map(items.__getitem__, sorted(range(len(keys)), key=keys.__getitem__))


# The fields the balanced order reads of a verdict, as C-level getters: it runs no
# Python code per plan past their judgement (``map`` and ``compress`` over these,
# then one sort of plain numbers).
_SCORE, _LEFT = itemgetter(4), itemgetter(6)


def _balanced(measured: list[Ranked]) -> tuple[Iterator[Ranked], Iterator[Ranked]]:
    """The measured plans the hysteresis admits (strictly above 5 % of their tightest
    window left), by band of their score, highest first; and the others, by score.

    The bands are a factor of ``SPREAD`` wide (1.25**k up to 1.25**(k+1)); within one
    the load-balance order decides (fewest agents first). Agents that leave a refusing
    plan together then spread over the plans that score about as well instead of all
    landing on the single best one (each arrival raises that plan's agent count), the
    way a ramp admits a herd a few at a time. (Strictly above 5 % left, a score is
    positive: its log is defined.)"""
    admitted = list(map(gt, map(_LEFT, measured), repeat(ADMISSION_FLOOR)))
    scored = list(compress(measured, admitted))
    spent = list(compress(measured, map(not_, admitted)))
    bands = map(floor, map(truediv, map(log, map(_SCORE, scored)), repeat(_LOG_SPREAD)))
    return _by_key(scored, list(map(neg, bands))), _by_key(
        spent, list(map(neg, map(_SCORE, spent)))
    )


def _banded(measured: list[Ranked]) -> list[Ranked]:
    """The measured plans by 10-point band of fullness, then agent count, the order
    given within both: in (band, agent count) buckets (a measured band is never None),
    a handful of keys to sort instead of thousands of plans."""
    buckets: dict[tuple[int | None, int], list[Ranked]] = {}
    for verdict in measured:
        key = (verdict[2][6], verdict[0][2])
        bucket = buckets.get(key)
        if bucket is None:
            buckets[key] = [verdict]
        else:
            bucket.append(verdict)
    return [verdict for key in sorted(buckets) for verdict in buckets[key]]


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
    balanced = strategy == BALANCED
    measured, unknown, excluded = admission.alternatives(candidates, readings, balanced=balanced)
    last_resort = tuple(j[0] for j in excluded if j[1][2])  # refused, still a last resort
    # Balanced: admitted by score, unknown, then the not admitted by score (a nearly
    # spent plan is still a plan before the key). Banded: measured, then unknown.
    if balanced:
        scored, spent = _balanced(measured)
        ordered = (*scored, *unknown, *spent)
    else:
        ordered = (*_banded(measured), *unknown)
    return Ranking(ordered, last_resort, tuple(excluded))
