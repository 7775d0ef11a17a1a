"""Which window instance a reset names: a provider's reset instant jitters by a second
or two between answers, while a real rollover moves it by a whole window.

Pure, no Django and no Redis. Everything that compares two resets of one window (the
refusal matcher, the headroom alerts, readmission) asks here, so they agree.
"""

from __future__ import annotations

from datetime import datetime, timedelta

# The CLI prints a reset to the minute ("resets 4:10am"), truncated or rounded, and a
# provider's reset jitters by seconds: within a minute is the same instant.
RESET_MATCH = timedelta(minutes=1)
_MATCH_SECONDS = int(RESET_MATCH.total_seconds())


def window_instance(resets_at: datetime) -> int:
    """The instance ``resets_at`` names: its unix seconds rounded to the nearest
    ``RESET_MATCH``. Nearest, not floor: providers reset on whole minutes and hours and
    jitter around them (:00, :59, :57 are one instance), so the rounding's edge sits
    half a minute away from where resets fall."""
    seconds = resets_at.timestamp()
    return int((seconds + _MATCH_SECONDS / 2) // _MATCH_SECONDS) * _MATCH_SECONDS


def same_reset(a: datetime, b: datetime) -> bool:
    """Whether two resets name one window instance: within ``RESET_MATCH``."""
    return abs(a - b) <= RESET_MATCH


def refused_after_reset(reset: datetime, refused_at: datetime) -> bool:
    """Whether a refusal at ``refused_at`` came after the window instance ending at
    ``reset`` rolled over (so that reset did not bring the quota back): later than the
    reset by more than its jitter. A refusal within ``RESET_MATCH`` of a reset belongs
    to the instance that reset ends."""
    return refused_at > reset + RESET_MATCH
