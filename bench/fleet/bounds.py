"""Two figures that bracket the hindsight optimum of a trace: lower ≤ optimum ≤ achievable.

``lower_usd`` is the MILP's bound (``bench.fleet.milp``): no policy spends less on the
key. ``achievable_usd`` is the key spend of the cheapest of the clairvoyant schedules
tried, each replayed through the simulated provider: the LP-planned one
(``bench.fleet.horizon``, planned once and re-planned every few hours) and the
greedy heuristic (``bench.fleet.achievable``): some policy spends no more. Both
are functions of the trace alone, so ``bounds_for`` keeps them in a sidecar
``<trace>.bounds.json`` keyed by the trace file's sha256 and solves again only when
the trace changed. The report's achievable figure is the cheaper of this one and
every policy's run replayed as a schedule (``bench.fleet.replay``); those replays are
not cached, since the policies change with the product code and a replay is cheap.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.fleet.achievable import Achievable, achievable_replay
from bench.fleet.horizon import horizon_replay
from bench.fleet.milp import TIME_LIMIT_SECONDS, lower_solve
from bench.fleet.trace import Trace

CURVE_POINTS = 500
# The schedules tried (``achievable_replay``'s ``calm``); the cheapest is kept. No one
# setting is best on every kept trace (steady, bursty, revoked: 0 on bursty).
CALM = (0.0, 0.5, 2.0)
# The LP-planned schedules tried (``horizon_replay``'s ``horizon``, seconds between
# plans; None: planned once). Re-planning costs an LP solve each time, so a solve
# with a short time limit (a held-out trace solved on the fly) plans once.
HORIZONS: tuple[float | None, ...] = (None, 6 * 60 * 60.0)
QUICK_SECONDS = 20.0  # a shorter time limit plans once and tries one heuristic
# And its bound's rate classes are this far apart: at the kept ones' 2 % HiGHS has
# not solved the root LP of a team week in 5 s (its dual bound was $0); at 25 % it
# has, $521 on team-2 against $588 in 50 s at 2 %.
QUICK_RATE_STEP = 0.25
Curve = tuple[tuple[datetime, float], ...]
DIGITS = 6  # rounding of every float written, so the sidecar's bytes are stable


@dataclass(frozen=True)
class Bounds:
    lower_usd: float
    achievable_usd: float
    # The achievable schedule's cumulative key spend, [(instant, $)], ascending.
    achievable_curve: Curve
    lower_status: str
    lower_gap: float | None
    lower_seconds: float
    achievable_seconds: float
    # Which schedule is the achievable: "LP plan", "LP plan every 6 h", "heuristic".
    achievable_source: str = "heuristic"


def bounds_solve(trace: Trace, *, time_limit: float = TIME_LIMIT_SECONDS) -> Bounds:
    """Solve both bounds for ``trace``: the MILP (its dual bound when it runs out of
    ``time_limit`` seconds) and the cheapest of the clairvoyant schedules tried (the
    re-planned LP schedule and every ``CALM`` only when ``time_limit`` is not short;
    a short one also coarsens the bound's rate classes, ``QUICK_RATE_STEP``: a trace
    of ~2,000 turns then solves in about 1.5 times ``time_limit``)."""
    quick = time_limit < QUICK_SECONDS
    if quick:
        lower = lower_solve(trace, time_limit=time_limit, rate_step=QUICK_RATE_STEP)
    else:
        lower = lower_solve(trace, time_limit=time_limit)
    schedules: list[tuple[str, Achievable]] = [
        (_named(horizon), horizon_replay(trace, horizon=horizon))
        for horizon in (HORIZONS[:1] if quick else HORIZONS)
    ]
    schedules += [
        ("heuristic", achievable_replay(trace, calm=calm)) for calm in (CALM[:1] if quick else CALM)
    ]
    source, best = min(schedules, key=lambda named: named[1].usd)  # ties: the first
    return Bounds(
        lower_usd=lower.usd,
        achievable_usd=best.usd,
        achievable_curve=best.curve,
        lower_status=lower.status,
        lower_gap=lower.gap,
        lower_seconds=lower.seconds,
        achievable_seconds=sum(schedule.seconds for _, schedule in schedules),
        achievable_source=source,
    )


def _named(horizon: float | None) -> str:
    return "LP plan" if horizon is None else f"LP plan every {horizon / 3600:g} h"


def thinned(curve: Curve, points: int = CURVE_POINTS) -> Curve:
    """At most ``points`` of ``curve``, evenly spaced by index, first and last kept."""
    if len(curve) <= points:
        return curve
    step = (len(curve) - 1) / (points - 1)
    return tuple(curve[round(i * step)] for i in range(points))


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sidecar_of(path: Path) -> Path:
    return path.with_name(path.name + ".bounds.json")


def sidecar_current(path: Path) -> bool:
    """Whether the trace at ``path`` has a sidecar that records its sha256 (else
    ``bounds_for`` solves)."""
    sidecar = sidecar_of(path)
    if not sidecar.exists():
        return False
    raw = json.loads(sidecar.read_text(encoding="utf-8"))
    return bool(raw.get("trace_sha256") == sha256_of(path))


def _json(bounds: Bounds, sha: str) -> dict[str, Any]:
    gap = None if bounds.lower_gap is None else round(bounds.lower_gap, DIGITS)
    return {
        "trace_sha256": sha,
        "lower_usd": round(bounds.lower_usd, DIGITS),
        "lower_status": bounds.lower_status,
        "lower_gap": gap,
        "lower_seconds": round(bounds.lower_seconds, 1),
        "achievable_usd": round(bounds.achievable_usd, DIGITS),
        "achievable_seconds": round(bounds.achievable_seconds, 1),
        "achievable_source": bounds.achievable_source,
        "achievable_curve": [
            [at.isoformat(), round(usd, DIGITS)] for at, usd in thinned(bounds.achievable_curve)
        ],
    }


def _text(data: dict[str, Any]) -> str:
    """``data`` as JSON, keys sorted, one line per key and one per curve point (so a
    committed sidecar diffs point by point)."""
    lines = []
    for key, value in sorted(data.items()):
        if key == "achievable_curve":
            points = ",\n".join(f"  {json.dumps(point)}" for point in value)
            lines.append(f" {json.dumps(key)}: [\n{points}\n ]")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _bounds(raw: dict[str, Any]) -> Bounds:
    return Bounds(
        lower_usd=float(raw["lower_usd"]),
        achievable_usd=float(raw["achievable_usd"]),
        achievable_curve=tuple(
            (datetime.fromisoformat(at), float(usd)) for at, usd in raw["achievable_curve"]
        ),
        lower_status=str(raw["lower_status"]),
        lower_gap=None if raw["lower_gap"] is None else float(raw["lower_gap"]),
        lower_seconds=float(raw["lower_seconds"]),
        achievable_seconds=float(raw["achievable_seconds"]),
        achievable_source=str(raw.get("achievable_source", "heuristic")),
    )


def bounds_for(trace: Trace, path: Path, *, refresh: bool = False) -> Bounds:
    """The bounds of ``trace`` read from ``path``: the sidecar's when it records the
    trace file's sha256 (and not ``refresh``), else solved and written to it.

    What comes back from a solve is what a later read gives (rounded as written).
    """
    if not refresh and sidecar_current(path):
        return _bounds(json.loads(sidecar_of(path).read_text(encoding="utf-8")))
    sha, sidecar = sha256_of(path), sidecar_of(path)
    text = _text(_json(bounds_solve(trace), sha))
    sidecar.write_text(text, encoding="utf-8")
    return _bounds(json.loads(text))
