"""Which quota window a refusal names, which turns it keeps out, and what it is
recorded with.

Pure, no Django and no Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import NamedTuple

from routing.headroom.instances import same_reset
from routing.headroom.reading import CORE_WINDOWS, Reading
from routing.headroom.throttle import THROTTLE, throttle_backoff
from routing.headroom.windows import FAMILY_WINDOW_PREFIX


def refusal_blocks(limiting_window: str | None, family: str | None) -> bool:
    """Whether a refusal that named ``limiting_window`` keeps out a turn of ``family``.

    A family window (``seven_day_sonnet``) keeps out only that family's turns; the core
    windows, a throttle and an unknown window ("") keep out every turn. A turn whose
    family is unknown (None: a model naming none, or no model, where the runtime picks
    its default) is kept out by any family's block: the block may be about it.
    """
    if not limiting_window or not limiting_window.startswith(FAMILY_WINDOW_PREFIX):
        return True
    return family is None or limiting_window == family


def refusal_window(
    reading: Reading | None,
    *,
    resets_at: datetime | None,
    now: datetime,
    claim: str = "",
    family: str | None = None,
) -> str:
    """The window a refusal was limited by ("" when nothing says).

    The provider's representative claim (``claim``) when the runtime saw it; else the
    cached reading's window whose reset is the refusal's (within ``RESET_MATCH``); else
    the reading's blocked windows that have not reset. Only the windows the refused
    turn spends count: the core two and its ``family``'s (every window when the
    family is unknown), so another family's block never explains this refusal. Among
    several, a blocked one first, then a core window (it keeps out every family: the
    safe side of an ambiguity, e.g. a weekly and a family window that started
    together), then the latest reset.
    """
    if claim:
        return claim
    if reading is None:
        return ""
    windows = {
        name: window
        for name, window in reading.windows.items()
        if family is None or name in CORE_WINDOWS or name == family
    }
    found: list[str] = []
    if resets_at is not None:
        found = [
            name
            for name, window in windows.items()
            if window.resets_at is not None and same_reset(window.resets_at, resets_at)
        ]
    if not found:
        found = [
            name
            for name, window in windows.items()
            if window.blocking and (window.resets_at is None or window.resets_at > now)
        ]
    if not found:
        return ""

    def preference(name: str) -> tuple[bool, bool, float]:
        window = windows[name]
        reset = window.resets_at.timestamp() if window.resets_at is not None else 0.0
        return (not window.blocking, name not in CORE_WINDOWS, -reset)

    return min(found, key=preference)


class RefusalLimit(NamedTuple):
    """What a rate-limit refusal is recorded with: its window and when it lifts."""

    limiting_window: str
    resets_at: datetime | None


def refusal_limit(
    reading: Reading | None,
    *,
    resets_at: datetime | None,
    claim: str,
    throttle: bool,
    earlier: Callable[[], Iterable[tuple[str, datetime]]],
    now: datetime,
    family: str | None = None,
) -> RefusalLimit:
    """The window and reset a subscription's rate-limit refusal is recorded with.

    The window is ``refusal_window``'s. A ``throttle`` (no quota evidence in the
    refusal) whose cached reading names no blocked window either is recorded as
    ``THROTTLE`` with its backoff's end as the reset, so the readmission that follows
    a reset applies; ``earlier`` (called only then) lists the subscription's earlier
    refusals as ``throttle_backoff`` takes them.
    """
    window = refusal_window(reading, resets_at=resets_at, now=now, claim=claim, family=family)
    if throttle and not window:
        return RefusalLimit(THROTTLE, now + throttle_backoff(earlier(), now=now))
    return RefusalLimit(window, resets_at)
