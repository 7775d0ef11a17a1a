"""The markdown a fleet comparison prints: one table per trace, and the targets."""

from __future__ import annotations

import math

from bench.fleet.bounds import Bounds
from bench.fleet.engine import Run
from bench.fleet.report import BASELINES, COMPARED, LOWER_LABEL, TARGET_RATIO, Comparison
from bench.fleet.trace import FAMILIES, Fleet, Trace

HEADER = (
    "| policy | completed | failed | parked | key $ | × achievable | unused 5h % | unused 7d % "
    "| switches | ping-pongs | rebuilt Mtok | notices | key min after reset | refusals |"
)
RULE = "|" + "---|" * 14
BLANK = " | | | | | | | | |"  # the columns a bound has no figure for


def _times(ratio: float) -> str:
    return "∞" if math.isinf(ratio) else f"{ratio:.3f}"


def _row(comparison: Comparison, run: Run) -> str:
    m = run.metrics
    cells = [
        run.policy,
        f"{m.completed}",
        f"{m.failed}",
        f"{m.parked}",
        f"{m.key_usd:.2f}",
        _times(comparison.ratio(m.key_usd)),
        f"{m.unused_five_hour_pct:.1f}",
        f"{m.unused_seven_day_pct:.1f}",
        f"{m.switches}",
        f"{m.ping_pongs}",
        f"{m.rebuilt_tokens / 1e6:.2f}",
        f"{m.notifications}",
        f"{m.key_minutes_after_reset:,.0f}",
        f"{m.refusals}",
    ]
    return "| " + " | ".join(cells) + " |"


def lower_status(bounds: Bounds) -> str:
    """How the MILP ended, in a few words: optimal or time limit, and its gap."""
    status = bounds.lower_status.lower()
    word = "time limit" if "time limit" in status else "optimal" if "optimal" in status else status
    gap = "" if bounds.lower_gap is None else f", gap {100 * bounds.lower_gap:.2f} %"
    return word + gap


def prices(fleet: Fleet) -> str:
    """The key's price per model family, $/Mtok (a v1 trace has one for all)."""
    if not fleet.key_prices:
        return f"key ${fleet.key_usd_per_mtok:g}/Mtok for every model family"
    each = ", ".join(
        f"{family} ${fleet.key_prices.get(family, fleet.key_usd_per_mtok):.4g}"
        for family in FAMILIES
    )
    return f"key $/Mtok per model family: {each}"


def cache(trace: Trace) -> str:
    """The cached prefixes the trace's requests carry and what a plan's windows count
    one read / one written token at; empty for a trace without them."""
    cached = sum(r.cached for t in trace.turns for r in t.parts)
    if not cached:
        return ""
    weights = trace.fleet.cache_weights
    return (
        f" fresh + {cached / 1e6:.1f} Mtok cached prefix (windows count a read "
        f"{weights['read']:g}, a write {weights['write']:g})"
    )


def table(comparison: Comparison) -> str:
    """The trace's header line, a row per policy, then the lower bound and the
    achievable schedule (and the simulator-rule line under it when measured)."""
    trace, bounds = comparison.trace, comparison.bounds
    tokens = sum(t.tokens for t in trace.turns)
    requests = sum(len(t.parts) for t in trace.turns)
    fleet = trace.fleet
    lines = [
        f"### {fleet.name}: {len(trace.turns):,} turns ({requests:,} requests), "
        f"{tokens / 1e6:.1f} Mtok{cache(trace)}, "
        f"{len(fleet.subscriptions)} plans, {len(fleet.agents)} agents, {prices(fleet)}"
        + (f" ({fleet.description})" if fleet.description else ""),
        "",
        HEADER,
        RULE,
    ]
    lines.extend(_row(comparison, run) for run in comparison.runs)
    achievable = comparison.achievable
    lines.append(
        f"| {LOWER_LABEL}: {lower_status(bounds)} | | | | {bounds.lower_usd:.2f} | "
        f"{_times(comparison.ratio(bounds.lower_usd))}" + BLANK
    )
    lines.append(f"| {achievable.label} | | | | {achievable.usd:.2f} | 1.000" + BLANK)
    if comparison.rule is not None:
        lines.extend(["", comparison.rule.line()])
    return "\n".join(lines)


TARGETS_HEADER = (
    "| trace | key $ ≤ every baseline's | key $ / achievable (target ≤ "
    f"{TARGET_RATIO:g}) | turns failed while a credential could serve (target 0) "
    "| ping-pongs (target ≤ 1 per agent per week) | notices per switch "
    f"(this project; {COMPARED}) |"
)


def _verdict(ok: bool) -> str:
    return "ok" if ok else "missed"


def _baselines(comparison: Comparison) -> str:
    """Whether this project's key $ is at most every baseline's; the ones below it."""
    own = comparison.project.metrics.key_usd
    beaten = [
        f"{name} by ${own - spend:.2f}"
        for name in BASELINES
        if (spend := comparison.run_of(name).metrics.key_usd) < own
    ]
    return "ok" if not beaten else "missed: " + ", ".join(beaten)


def ping_pong_budget(comparison: Comparison) -> float:
    """One ping-pong per agent per week, scaled to the trace's length."""
    fleet = comparison.trace.fleet
    return len(fleet.agents) * (fleet.end - fleet.start).total_seconds() / (7 * 86400)


def _per_switch(run: Run) -> str:
    m = run.metrics
    return f"{m.notifications / m.switches:.2f}" if m.switches else "–"


def targets(comparisons: list[Comparison]) -> str:
    """The targets, measured, one line per trace (a miss is reported, not raised)."""
    lines = [TARGETS_HEADER, "|---|---|---|---|---|---|"]
    for c in comparisons:
        run = c.project
        ratio = c.ratio(run.metrics.key_usd)
        budget = ping_pong_budget(c)
        pongs = run.metrics.ping_pongs
        failed = run.metrics.failed_while_servable
        lines.append(
            f"| {c.trace.fleet.name} | {_baselines(c)} "
            f"| {_times(ratio)} ({_verdict(ratio <= TARGET_RATIO)}) "
            f"| {failed} ({_verdict(failed == 0)}) "
            f"| {pongs} of {budget:.1f} ({_verdict(pongs <= budget)}) "
            f"| {_per_switch(run)}; {_per_switch(c.run_of(COMPARED))} |"
        )
    return "\n".join(lines)
