"""The PNG plots of a fleet comparison: usage per plan over time (this project's run)
and cumulative key spend per policy beside the bounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.fleet.report import LOWER_LABEL, Comparison


def plots(comparison: Comparison, out: Path) -> list[Path]:
    """Both plots of ``comparison`` as PNG files under ``out``, returned."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    name = comparison.trace.fleet.name
    written = []
    for suffix, draw in (("usage", _usage), ("key-spend", _key_spend)):
        figure = draw(plt, comparison)
        figure.autofmt_xdate()
        figure.tight_layout()
        path = out / f"fleet-{name}-{suffix}.png"
        figure.savefig(path, dpi=90, metadata={"Software": None})
        plt.close(figure)
        written.append(path)
    return written


def _usage(plt: Any, comparison: Comparison) -> Any:
    from matplotlib.dates import date2num

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
    axes[0].set_title(
        f"{comparison.trace.fleet.name}: usage per subscription over time ({run.policy})"
    )
    return figure


def _key_spend(plt: Any, comparison: Comparison) -> Any:
    """Each policy's curve, the achievable schedule's (dashed) and the lower bound
    (a dotted horizontal line: the MILP gives a total, not a curve)."""
    from matplotlib.dates import date2num

    figure, axis = plt.subplots(figsize=(10, 4.5))
    for run in comparison.runs:
        curve = run.key_spend_curve()
        axis.step(
            date2num([p[0] for p in curve]), [p[1] for p in curve], where="post", label=run.policy
        )
    achievable = comparison.achievable
    axis.step(
        date2num([p[0] for p in achievable.curve]),
        [p[1] for p in achievable.curve],
        where="post",
        label=f"{achievable.label}: ${achievable.usd:.2f}",
        color="black",
        linestyle="--",
    )
    lower = comparison.bounds.lower_usd
    axis.axhline(lower, color="black", linestyle=":", label=f"{LOWER_LABEL}: ${lower:.2f}")
    axis.xaxis_date()
    axis.set_ylabel("cumulative key spend ($)")
    axis.set_title(f"{comparison.trace.fleet.name}: cumulative platform-key spend per policy")
    axis.grid(alpha=0.3)
    axis.legend(loc="upper left", fontsize="small")
    return figure
