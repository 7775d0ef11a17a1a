"""What the clairvoyant schedule knows of the future: the dearest request still to come.

A window that is about to go over its capacity serves the request that takes it
over whole, so the schedule wants that request to be the one the key would charge
most for (its tokens at its model's key price). ``Foresight.dearest`` answers "the
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


class _RangeMax:
    def __init__(self, times: list[float], values: list[float]) -> None:
        self.times = np.array(times, dtype=float)
        levels = [np.array(values, dtype=float)]
        while 2 ** len(levels) <= len(values):
            last, half = levels[-1], 2 ** (len(levels) - 1)
            levels.append(np.maximum(last[:-half], last[half:]))
        self.levels = levels

    def largest(self, after: float, until: float) -> float:
        lo = int(np.searchsorted(self.times, after, side="right"))
        hi = int(np.searchsorted(self.times, until, side="left"))
        if hi <= lo:
            return 0.0
        level = (hi - lo).bit_length() - 1
        table = self.levels[level]
        return float(max(table[lo], table[hi - 2**level]))


class Foresight:
    """The requests of a trace, indexed by the windows they count against."""

    def __init__(self, requests: list[FlatRequest], price: Callable[[str], float]) -> None:
        """``price``: the key's $ per Mtok of a model."""
        by_kind: dict[str, tuple[list[float], list[float]]] = {}
        for request in requests:
            kinds = [_EVERY]
            if request.family in FAMILY_WINDOW:
                kinds.append(FAMILY_WINDOW[request.family])
            for kind in kinds:
                times, values = by_kind.setdefault(kind, ([], []))
                times.append(to_unix(request.at))
                values.append(request.tokens * price(request.model))
        self.tables = {kind: _RangeMax(*columns) for kind, columns in by_kind.items()}
        # Just after the last request: no room is of use later (a turn may run past
        # the trace's end).
        self.last = max((to_unix(r.at) for r in requests), default=0.0) + 1.0

    def dearest(self, window: str, after: float, until: float) -> float:
        """What the key would charge (tokens × $/Mtok) for the dearest request in
        (after, until) that counts against ``window``; 0 if none."""
        kind = window if window in FAMILY_WINDOW.values() else _EVERY
        table = self.tables.get(kind)
        return 0.0 if table is None else table.largest(after, until)
