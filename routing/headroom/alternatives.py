"""The alternatives a walk tries, in order, and why the first is first.

Pure, no Django and no Redis: ``selection.py`` fills a ``Selection`` from the
database and the store; the walk, pre-dispatch and the explainer read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from routing.headroom.candidates import Candidate
from routing.headroom.classification import NO_EVIDENCE, Tier
from routing.headroom.ranking import Ranked


@dataclass(frozen=True)
class Selection:
    """The ranked alternatives, the last-resort ones, and why.

    ``fallback`` is empty when the ranking ran, else names why the DB order came
    back (``store_unreachable`` or ``ranking_failed``).
    """

    ranked: tuple[Ranked, ...]
    last_resort: tuple[Candidate, ...]
    dropped: tuple[Candidate, ...] = ()
    fallback: str = ""
    now: datetime | None = None

    @property
    def first(self) -> Ranked | None:
        return self.ranked[0] if self.ranked else None

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
