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
from itertools import chain
from operator import itemgetter
from typing import Any

from routing.eligibility import Admission, Admitted, Candidate, Judged, Reason
from routing.headroom.candidates import LoadBalanced
from routing.headroom.reading import Reading

BANDED, BALANCED = "banded", "balanced"  # trinity.models.RoutingStrategy's values


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


def _by_key(items: list[Ranked], keys: list[Any]) -> Iterator[Ranked]:
    # Stable: equal keys keep the order given (the load-balance order).
    return map(items.__getitem__, sorted(range(len(keys)), key=keys.__getitem__))


_AGENT_COUNT = itemgetter(2)  # a candidate's


def _in_count_order(candidates: Sequence[Candidate]) -> bool:
    """Whether ``candidates`` come by agent count, fewest first (as in load-balance
    order): known of ``in_load_balance_order``'s, else checked (in C, a sort that
    finds them sorted in one pass)."""
    if type(candidates) is LoadBalanced:
        return True
    counts = list(map(_AGENT_COUNT, candidates))
    return counts == sorted(counts)


def _verdict_agent_count(verdict: Ranked) -> int:
    return verdict[0][2]


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
    found = admission.alternatives(candidates, readings, balanced=balanced)
    measured, excluded = found.measured, found.excluded
    if not balanced and not _in_count_order(candidates):
        # Banded ranks by agent count within a band: given out of load-balance order,
        # each band is put in it (stable: the order given within one count).
        for verdicts in measured.values():
            verdicts.sort(key=_verdict_agent_count)
    last_resort = tuple(j[0] for j in excluded if j[1][2])  # refused, still a last resort
    # Balanced: admitted by band of their score, highest first (``balance.spread_band``:
    # the load-balance order within one), unknown, then the measured ones below the
    # hysteresis floor by score (a nearly spent plan is still a plan before the key).
    # Banded: measured by band of fullness, then agent count; then unknown (nothing is
    # spent). Each group by the key it came with (``eligibility.Alternatives``).
    ordered = (
        *chain.from_iterable(map(measured.__getitem__, sorted(measured))),
        *found.unknown,
        *_by_key(found.spent, found.spent_keys),
    )
    return Ranking(ordered, last_resort, tuple(excluded))
