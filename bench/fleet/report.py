"""Run every policy over a trace, check the runs, and render the table and the plots."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from agents.rung import RungKind
from bench.fleet.engine import Run, TurnRecord, simulate
from bench.fleet.lineup import POLICIES
from bench.fleet.optimum import Optimum, optimum_solve
from bench.fleet.project import ProjectPolicy
from bench.fleet.trace import Trace
from bench.fleet.world import to_unix
from simulator.state import WINDOW_DURATIONS

OPTIMUM_LABEL = "hindsight optimum (LP)"
CAPACITY_LABEL = "capacity LP (no overdraw; not a bound)"
TARGET_RATIO = 1.05
# HiGHS solves to a relative tolerance; a policy equal to the optimum may sit a hair
# below the reported bound.
LP_SLACK_USD = 1e-6
# Two rules' resets this close (seconds) count as the same instant.
RESET_TOLERANCE = 30 * 60


@dataclass(frozen=True)
class RuleGap:
    """This project's run under the simulator's own window rule (a window starts at
    the first request after a reset) beside its run on phased windows: key spend
    under each, and how many of the simulator-rule 5-hour periods reset more than
    ``RESET_TOLERANCE`` away from the phase."""

    phased_usd: float
    simulator_usd: float
    periods: int
    moved: int

    def line(self) -> str:
        share = 100 * self.moved / self.periods if self.periods else 0.0
        return (
            f"Under the simulator's own window rule this project's key spend is "
            f"${self.simulator_usd:.2f} (phased: ${self.phased_usd:.2f}); {self.moved} of "
            f"{self.periods} 5-hour periods ({share:.1f} %) reset more than "
            f"{RESET_TOLERANCE // 60:.0f} min off the phase."
        )


@dataclass(frozen=True)
class Comparison:
    trace: Trace
    runs: tuple[Run, ...]
    optimum: Optimum
    # The same LP with every window holding exactly what it had left (no allowance
    # for the request that crosses it): not a bound, the yardstick docs explain.
    capacity: Optimum
    # This project's policy under the simulator's window rule (None: not measured).
    rule: RuleGap | None = None

    @property
    def project(self) -> Run:
        return next(r for r in self.runs if r.policy == ProjectPolicy.name)

    def ratio(self, run: Run, *, capacity: bool = False) -> float:
        spend = run.metrics.key_usd
        reference = (self.capacity if capacity else self.optimum).key_usd
        if reference <= LP_SLACK_USD:
            return 1.0 if spend <= LP_SLACK_USD else math.inf
        return spend / reference


def compare(trace: Trace, *, rules: bool = True) -> Comparison:
    """Every policy over ``trace``, both LPs, and (``rules``) the project's run under
    the simulator's own window rule."""
    runs = tuple(simulate(trace, policy) for policy in POLICIES)
    comparison = Comparison(trace, runs, optimum_solve(trace), optimum_solve(trace, overdraw=False))
    if not rules:
        return comparison
    return replace(comparison, rule=rule_gap(trace, comparison.project))


def rule_gap(trace: Trace, phased: Run) -> RuleGap:
    """Run this project's policy under the simulator's rule and set it beside
    ``phased``: each 5-hour reset it met, measured against its plan's phase."""
    run = simulate(trace, ProjectPolicy, phased=False)
    duration = WINDOW_DURATIONS["five_hour"]
    phase = {s.name: to_unix(s.windows["five_hour"].first_reset) for s in trace.fleet.subscriptions}
    periods = moved = 0
    for reset in run.resets:
        if reset.window != "five_hour" or reset.revoked:
            continue
        periods += 1
        offset = (reset.at - phase[reset.subscription]) % duration
        moved += min(offset, duration - offset) > RESET_TOLERANCE
    return RuleGap(phased.metrics.key_usd, run.metrics.key_usd, periods, moved)


def check(comparison: Comparison) -> list[str]:
    """What must hold whatever the policy; returns the violations (empty when sound).

    Every turn ran exactly once (one record per turn); each request was served at
    most once and in order (one served attempt per served request, none for the
    rest); each plan's windows counted exactly the tokens of the requests it served;
    where the LP is a bound (``lp_bounds``), no policy spent less on the key (failed
    requests priced as if the key had served them) than the optimum.
    """
    problems: list[str] = []
    trace = comparison.trace
    names = {i: s.name for i, s in enumerate(trace.fleet.subscriptions, start=1)}
    for run in comparison.runs:
        if [r.index for r in run.records] != list(range(len(trace.turns))):
            problems.append(f"{run.policy}: turns lost or run twice")
        served: dict[str, int] = {s.name: 0 for s in trace.fleet.subscriptions}
        for record in run.records:
            problems.extend(f"{run.policy}: {p}" for p in _requests_once(record))
            for request in record.result.served:
                if request.rung.kind is RungKind.SUBSCRIPTION:
                    assert request.rung.subscription_id is not None
                    name = names[request.rung.subscription_id]
                    served[name] += record.turn.parts[request.request].tokens
        for window, counted in run.plan_tokens.items():
            if counted != served:
                problems.append(f"{run.policy}: {window} counted {counted}, served {served}")
        floor = run.metrics.key_usd + run.metrics.failed_usd
        if lp_bounds(trace) and floor + LP_SLACK_USD < comparison.optimum.key_usd:
            problems.append(
                f"{run.policy}: ${floor:.4f} is below the optimum ${comparison.optimum.key_usd:.4f}"
            )
    return problems


def _requests_once(record: TurnRecord) -> list[str]:
    result = record.result
    wins = [a.request for a in result.attempts if a.served]
    order = [s.request for s in result.served]
    if wins != order or order != list(range(len(order))):
        return [f"turn {record.index}: requests served {wins}, recorded {order}"]
    return []


def lp_bounds(trace: Trace) -> bool:
    """Whether ``optimum.py``'s LP bounds this trace's runs: it reads each turn as one
    request of all its tokens at one key price, so it bounds only traces of that shape
    and knows no plan added or removed (the bounds of multi-request turns, per-model
    prices and a changing fleet are ``bounds.py``'s)."""
    single = all(len(turn.parts) == 1 for turn in trace.turns)
    prices = {trace.fleet.key_price(trace.model_of(turn)) for turn in trace.turns}
    fixed = all(s.added_at is None and s.removed_at is None for s in trace.fleet.subscriptions)
    return single and fixed and prices <= {trace.fleet.key_usd_per_mtok}


HEADER = (
    "| policy | completed | failed | parked | key $ | × optimum | unused 5h % | unused 7d % "
    "| switches | ping-pongs | notices | key min after reset | refusals |"
)
RULE = "|" + "---|" * 13


def _row(comparison: Comparison, run: Run) -> str:
    m = run.metrics
    ratio = comparison.ratio(run)
    cells = [
        run.policy,
        f"{m.completed}",
        f"{m.failed}",
        f"{m.parked}",
        f"{m.key_usd:.2f}",
        "∞" if math.isinf(ratio) else f"{ratio:.3f}",
        f"{m.unused_five_hour_pct:.1f}",
        f"{m.unused_seven_day_pct:.1f}",
        f"{m.switches}",
        f"{m.ping_pongs}",
        f"{m.notifications}",
        f"{m.key_minutes_after_reset:,.0f}",
        f"{m.refusals}",
    ]
    return "| " + " | ".join(cells) + " |"


def table(comparison: Comparison) -> str:
    trace = comparison.trace
    tokens = sum(t.tokens for t in trace.turns)
    requests = sum(len(t.parts) for t in trace.turns)
    fleet = trace.fleet
    lines = [
        f"### {fleet.name}: {len(trace.turns):,} turns ({requests:,} requests), "
        f"{tokens / 1e6:.1f} Mtok, "
        f"{len(fleet.subscriptions)} plans, {len(fleet.agents)} agents, "
        f"key ${fleet.key_usd_per_mtok:g}/Mtok"
        + (f" ({fleet.description})" if fleet.description else ""),
        "",
        HEADER,
        RULE,
    ]
    lines.extend(_row(comparison, run) for run in comparison.runs)
    opt, cap = comparison.optimum, comparison.capacity
    lines.append(
        f"| {OPTIMUM_LABEL} | {len(trace.turns)} | 0 | 0 | {opt.key_usd:.2f} | 1.000 "
        "| | | | | | | |"
    )
    ratio = cap.key_usd / opt.key_usd if opt.key_usd > LP_SLACK_USD else math.inf
    lines.append(
        f"| {CAPACITY_LABEL} | {len(trace.turns)} | 0 | 0 | {cap.key_usd:.2f} | "
        + ("∞" if math.isinf(ratio) else f"{ratio:.3f}")
        + " | | | | | | | |"
    )
    if comparison.rule is not None:
        lines.extend(["", comparison.rule.line()])
    return "\n".join(lines)


def targets(comparisons: list[Comparison]) -> str:
    """The three targets, measured, one line per trace."""
    lines = [
        "| trace | this project's key $ / optimum (target ≤ 1.05) | … / capacity LP "
        "| turns failed while a credential could serve (target 0) | ping-pongs (target 0) |",
        "|---|---|---|---|---|",
    ]
    for c in comparisons:
        run = c.project
        ratio = c.ratio(run)
        verdict = "ok" if ratio <= TARGET_RATIO else "missed"
        lines.append(
            f"| {c.trace.fleet.name} | {ratio:.3f} ({verdict}) | "
            f"{c.ratio(run, capacity=True):.3f} | "
            f"{run.metrics.failed_while_servable} | {run.metrics.ping_pongs} |"
        )
    return "\n".join(lines)


# Plots


def plots(comparison: Comparison, out: Path) -> list[Path]:
    """Usage per subscription over time (this project's run) and cumulative key spend
    per policy; PNG files under ``out``, returned."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt
    from matplotlib.dates import date2num

    out.mkdir(parents=True, exist_ok=True)
    name = comparison.trace.fleet.name
    written = []

    run = comparison.project
    figure, axes = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    times = date2num([at for at, _ in run.samples])
    for subscription in comparison.trace.fleet.subscriptions:
        for axis, window in zip(axes, ("five_hour", "seven_day"), strict=True):
            values = [100 * sample[subscription.name][window] for _, sample in run.samples]
            axis.plot(times, values, label=subscription.name, linewidth=1)
    axes[0].set_ylabel("5h window used (%)")
    axes[1].set_ylabel("7d window used (%)")
    for axis in axes:
        axis.xaxis_date()
        axis.axhline(100, color="grey", linewidth=0.5, linestyle="--")
        axis.grid(alpha=0.3)
    axes[0].legend(loc="upper right", fontsize="small", ncol=4)
    axes[0].set_title(f"{name}: usage per subscription over time ({run.policy})")
    figure.autofmt_xdate()
    figure.tight_layout()
    path = out / f"fleet-{name}-usage.png"
    figure.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(figure)
    written.append(path)

    figure, axis = plt.subplots(figsize=(10, 4.5))
    for each in comparison.runs:
        curve = each.key_spend_curve()
        axis.step(
            date2num([p[0] for p in curve]), [p[1] for p in curve], where="post", label=each.policy
        )
    curve = comparison.optimum.key_spend_curve(comparison.trace)
    axis.step(
        date2num([p[0] for p in curve]),
        [p[1] for p in curve],
        where="post",
        label=OPTIMUM_LABEL,
        color="black",
        linestyle="--",
    )
    axis.xaxis_date()
    axis.set_ylabel("cumulative key spend ($)")
    axis.set_title(f"{name}: cumulative platform-key spend per policy")
    axis.grid(alpha=0.3)
    axis.legend(loc="upper left", fontsize="small")
    figure.autofmt_xdate()
    figure.tight_layout()
    path = out / f"fleet-{name}-key-spend.png"
    figure.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(figure)
    written.append(path)
    return written
