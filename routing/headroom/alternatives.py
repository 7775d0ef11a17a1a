"""The alternatives a walk tries, in order, why the first is first, and why every
other plan of the provider is not among them.

Pure, no Django and no Redis: ``subscriptions/plan_facts.py`` gathers the facts from the
database and the store, ``select`` judges and ranks them; the walk, pre-dispatch,
placement and the explainer read the ``Selection``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from routing.eligibility import Admission, Candidate, Judged
from routing.headroom.classification import NO_EVIDENCE, Tier
from routing.headroom.ranking import BANDED, Ranked, dropped_of, rank_candidates
from routing.headroom.reading import Reading


@dataclass(frozen=True)
class Selection:
    """The admitted alternatives ranked, the last-resort ones, and every other plan of
    the provider with the verdict that kept it out (``excluded``; ``admit``'s).

    ``fallback`` is empty when the readings ranked it, else names why they could not
    (``store_unreachable``: judged and ordered without them).
    """

    ranked: tuple[Ranked, ...]
    last_resort: tuple[Candidate, ...]
    excluded: tuple[Judged, ...] = ()
    fallback: str = ""
    now: datetime | None = None

    @property
    def first(self) -> Ranked | None:
        return self.ranked[0] if self.ranked else None

    @property
    def dropped(self) -> tuple[Candidate, ...]:
        """The plans a fresh reading says refuse (never tried, not even as a last resort)."""
        return dropped_of(self.excluded)

    def order(self) -> list[int]:
        """Subscription ids in the order a walk should try them."""
        return [r.candidate.subscription_id for r in self.ranked] + [
            c.subscription_id for c in self.last_resort
        ]

    def reason(self, ranked: Ranked | None = None) -> dict[str, Any]:
        """Why ``ranked`` (default: the first) is where it is, for a switch to explain itself."""
        chosen = ranked or self.first
        headroom = chosen.headroom if chosen else NO_EVIDENCE
        age = headroom.age_seconds(self.now) if self.now is not None else None
        return {
            "subscription_id": chosen.candidate.subscription_id if chosen else None,
            "tier": chosen.tier.value if chosen else None,
            "readmitted": chosen.readmitted.value if chosen and chosen.readmitted else None,
            "five_hour": headroom.five_hour,
            "seven_day": headroom.seven_day,
            "band": headroom.band if chosen and chosen.tier is Tier.MEASURED else None,
            "score": round(chosen.score, 1) if chosen and chosen.score is not None else None,
            "limiting_window": chosen.limiting_window if chosen else None,
            "reading_age_seconds": int(age) if age is not None else None,
            "candidate_count": len(self.ranked),
            "last_resort_count": len(self.last_resort),
            "dropped_count": len(self.dropped),
            "fallback": self.fallback or None,
        }


def select(
    candidates: Sequence[Candidate],
    readings: Mapping[int, Reading] | None,
    admission: Admission,
    *,
    strategy: str = BANDED,
    fallback: str = "",
) -> Selection:
    """Every one of the provider's ``candidates`` judged (``admission``: ``admit``) and
    the admitted ones ranked with ``strategy`` by their ``readings``. ``readings``
    None: the store did not answer, so every plan is judged and ordered without them
    (load-balance order; ``fallback`` says why, ``store_unreachable`` by default)."""
    if readings is None:
        readings, fallback = {}, fallback or "store_unreachable"
    ranking = rank_candidates(candidates, readings, admission, strategy=strategy)
    return Selection(
        ranking.ranked, ranking.last_resort, ranking.excluded, fallback, now=admission.now
    )
