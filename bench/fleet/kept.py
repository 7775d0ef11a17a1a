"""The kept traces' run, one trace a job: every policy over it, its table, its targets
row, the invariants it broke, its plots. ``kept_results`` runs the jobs in spawned
processes (``python -m bench.fleet --workers N``), each booting Django's settings
itself; only text and paths come back."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def _boot() -> None:
    from bench.fleet.__main__ import boot

    boot()


def _shown(path: Path) -> Path:
    from bench.fleet.__main__ import _shown as shown

    return shown(path)


@dataclass(frozen=True)
class KeptJob:
    path: Path
    refresh: bool
    rules: bool
    out: Path | None  # where the plots go (None: no plots)


@dataclass(frozen=True)
class KeptDone:
    """One trace's part of the output: what it printed, its targets row, the
    invariants it broke and the plots it wrote; or why it could not be read."""

    text: str = ""
    target_rows: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    written: tuple[Path, ...] = ()
    error: str = ""


def _kept(job: KeptJob) -> KeptDone:
    """Every policy over one trace, in this process (``boot`` done)."""
    from bench.fleet.bounds import bounds_for, sidecar_current, sidecar_of
    from bench.fleet.plots import plots
    from bench.fleet.report import check, compare
    from bench.fleet.tables import table, targets
    from bench.fleet.trace import TraceError, trace_read

    try:
        trace = trace_read(job.path)
    except (OSError, TraceError) as exc:
        return KeptDone(error=f"{job.path}: {exc}")
    text = []
    solving = job.refresh or not sidecar_current(job.path)
    began = time.perf_counter()
    bounds = bounds_for(trace, job.path, refresh=job.refresh)
    if solving:
        text.append(
            f"Solved the bounds of {_shown(job.path)} in {time.perf_counter() - began:.1f} s "
            f"(its sidecar was {'refreshed' if job.refresh else 'missing or stale'}); "
            f"wrote {_shown(sidecar_of(job.path))}\n"
        )
    comparison = compare(trace, bounds, rules=job.rules)
    text.append(table(comparison) + "\n")
    return KeptDone(
        text="\n".join(text),
        # The targets table of this trace alone: its header, then its row.
        target_rows=tuple(targets([comparison]).splitlines()[2:]),
        problems=tuple(f"{trace.fleet.name}: {p}" for p in check(comparison)),
        written=tuple(plots(comparison, job.out)) if job.out is not None else (),
    )


def kept_results(jobs: list[KeptJob], workers: int) -> Iterator[KeptDone]:
    """The traces' results in order; ``workers`` > 1: that many spawned processes
    (each boots Django itself), else here."""
    if workers <= 1 or len(jobs) <= 1:
        yield from map(_kept, jobs)
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(min(workers, len(jobs)), initializer=_boot) as pool:
        yield from pool.imap(_kept, jobs)
