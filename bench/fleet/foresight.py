"""What the clairvoyant schedule knows of the future: the dearest request still to come.

A window that is about to go over its capacity serves the request that takes it
over whole, so the schedule wants that request to be the one the key would charge
most for (what the key bills for it with its prefix warm). ``Foresight.dearest`` answers "the
dearest request after ``at`` and before ``until`` that counts against a window of
this kind" in constant time (a sparse table of range maxima).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bench.fleet.cells import FlatRequest
from bench.fleet.world import to_unix
from simulator.state import FAMILY_WINDOW

_EVERY = "*"  # the 5h and 7d windows: every request counts against them


class _RangeTop:
    """Per aligned block of 2**l requests, its ``keep`` dearest values (descending):
    any range is O(log n) blocks, and counting the values above v in each block's
    top counts them exactly up to ``keep``."""

    def __init__(self, times: list[float], values: list[float], keep: int) -> None:
        self.times = np.array(times, dtype=float)
        level = np.full((len(values), keep), -np.inf)
        level[:, 0] = values
        self.levels = [level]
        while len(level) > 1:
            if len(level) % 2:
                level = np.vstack([level, np.full((1, keep), -np.inf)])
            pairs = np.hstack([level[0::2], level[1::2]])
            level = -np.sort(-pairs, axis=1)[:, :keep]
            self.levels.append(level)

    def dearer(self, after: float, until: float, value: float, enough: int) -> int:
        """How many requests in (after, until) are dearer than ``value``, counted up
        to ``enough`` (at most the ``keep`` given)."""
        lo = int(np.searchsorted(self.times, after, side="right"))
        hi = int(np.searchsorted(self.times, until, side="left"))
        count = 0
        while lo < hi and count < enough:
            size = 0
            while size + 1 < len(self.levels) and lo % (2 << size) == 0 and lo + (2 << size) <= hi:
                size += 1
            count += int(np.count_nonzero(self.levels[size][lo >> size] > value))
            lo += 1 << size
        return min(count, enough)


class Foresight:
    """The requests of a trace, indexed by the windows they count against."""

    def __init__(
        self, requests: list[FlatRequest], value: Callable[[FlatRequest], float], keep: int
    ) -> None:
        """``value``: what the key would charge for a request (any unit, the one
        ``dearer`` is asked in); ``keep``: the most dearer requests ``dearer`` will
        count."""
        by_kind: dict[str, tuple[list[float], list[float]]] = {}
        for request in requests:
            kinds = [_EVERY]
            if request.family in FAMILY_WINDOW:
                kinds.append(FAMILY_WINDOW[request.family])
            for kind in kinds:
                times, values = by_kind.setdefault(kind, ([], []))
                times.append(to_unix(request.at))
                values.append(value(request))
        self.tables = {kind: _RangeTop(*columns, keep) for kind, columns in by_kind.items()}
        # Just after the last request: no room is of use later (a turn may run past
        # the trace's end).
        self.last = max((to_unix(r.at) for r in requests), default=0.0) + 1.0

    def dearer(self, window: str, after: float, until: float, value: float, enough: int) -> int:
        """How many requests in (after, until) that count against ``window`` the key
        would charge more for than ``value``, counted up to
        ``enough``."""
        kind = window if window in FAMILY_WINDOW.values() else _EVERY
        table = self.tables.get(kind)
        return 0 if table is None else table.dearer(after, until, value, enough)
