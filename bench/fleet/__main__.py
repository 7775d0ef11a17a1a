"""``python -m bench.fleet [--trace PATH ...] [--out DIR] [--refresh-bounds] [--no-rules]``,
or ``python -m bench.fleet --holdout N [--seed S] [--lineup baselines|all] [--write DIR]``.

The fleet benchmark. Without ``--trace`` it replays the kept traces
(bench/fleet/traces/). Prints one markdown table per trace (every policy's key $
against the achievable schedule, the MILP's lower bound and the achievable figure
under it), the targets measured, the wall time, and writes the PNG plots to ``--out``
(default var/bench-fleet). The bounds come from each trace's sidecar
(``<trace>.bounds.json``); a missing or stale one is solved (a minute or so a trace)
and written, and the output says so. The line under each table is this project's
policy under the simulator's own window rule: one more run of the project's policy
per trace (about a tenth of the time), which ``--no-rules`` skips.

Exits 1 if a run breaks an invariant (a turn lost or run twice, a request served
twice, windows that disagree with the requests they served, a run whose replay is
refused or pays differently, a policy or the achievable schedule below the lower
bound); a missed target is reported, not an error.

``--holdout N`` runs N traces the policy never saw instead (``bench.fleet.holdout``:
drawn from ``--seed``, random by default and printed first; none kept unless
``--write DIR``), and prints a row per trace, the distribution and the held-out
targets; it exits 1 on the same invariant breaks.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACES = Path(__file__).resolve().parent / "traces"
KEPT = ("steady", "bursty", "revoked", "team-1", "team-2", "team-3")


def boot() -> None:
    """Django settings for the code the simulation calls; no database is touched.

    DATABASE_URL and REDIS_URL are ignored on purpose (a throwaway SQLite path that
    is never opened, the embedded cache): the simulation keeps its state in memory.
    """
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    workdir = tempfile.mkdtemp(prefix="trinity-fleet-")
    os.environ["DJANGO_SETTINGS_MODULE"] = "trinity.settings"
    os.environ["TRINITY_VAR_DIR"] = workdir
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir}/unused.sqlite3"
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__)
    parser.add_argument("--trace", action="append", type=Path, help="a trace file (repeatable)")
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench-fleet")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument(
        "--refresh-bounds", action="store_true", help="solve the bounds again, sidecar or not"
    )
    parser.add_argument(
        "--no-rules",
        action="store_true",
        help="skip this project's run under the simulator's window rule (~10 %% of the time)",
    )
    held = parser.add_argument_group("held-out traces (bench/fleet/holdout.py)")
    held.add_argument(
        "--holdout", type=int, metavar="N", help="draw N traces the policy never saw and run them"
    )
    held.add_argument("--seed", type=int, metavar="S", help="the draw's seed (default: random)")
    held.add_argument(
        "--lineup",
        choices=("baselines", "all"),
        default="baselines",
        help="this project and the outside baselines (default), or every policy",
    )
    held.add_argument(
        "--time-limit", type=float, metavar="SECONDS", help="the MILP's time limit per trace"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="processes, one trace each at a time (default 2)"
    )
    held.add_argument(
        "--write",
        type=Path,
        metavar="DIR",
        help="also write the drawn traces there (replay: --trace)",
    )
    args = parser.parse_args(argv)
    if args.holdout is not None and (args.holdout < 1 or args.trace):
        parser.error("--holdout takes N >= 1 and no --trace")
    if args.seed is not None and args.seed < 0:
        parser.error("--seed takes a whole number >= 0")
    return args


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def _holdout(args: argparse.Namespace) -> int:
    from bench.fleet.holdout import TIME_LIMIT_SECONDS, holdout_main

    return holdout_main(
        args.holdout,
        args.seed,
        lineup=args.lineup,
        time_limit=args.time_limit or TIME_LIMIT_SECONDS,
        workers=args.workers,
        write=args.write,
    )


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    if args.holdout is not None:
        return _holdout(args)
    boot()  # the tables' header below; each worker boots its own
    from bench.fleet.kept import KeptJob, kept_results
    from bench.fleet.tables import TARGETS_HEADER

    paths = args.trace or [TRACES / f"{name}.jsonl" for name in KEPT]
    out = None if args.no_plots else args.out
    jobs = [KeptJob(path, args.refresh_bounds, not args.no_rules, out) for path in paths]
    started = time.perf_counter()
    rows: list[str] = []
    problems: list[str] = []
    written: list[Path] = []
    for done in kept_results(jobs, args.workers):
        if done.error:
            print(done.error, file=sys.stderr)
            return 2
        print(done.text)
        rows.extend(done.target_rows)
        problems.extend(done.problems)
        written.extend(done.written)
    print("Targets, measured:")
    print()
    print("\n".join([TARGETS_HEADER, "|---|---|---|---|---|---|", *rows]))
    print()
    elapsed = time.perf_counter() - started
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    processes = max(1, min(args.workers, len(jobs)))
    print(
        f"{len(paths)} trace(s) in {elapsed:.1f} s wall on {processes} process(es) "
        f"({os.cpu_count()} CPUs, load {load})"
    )
    for path in written:
        print(f"wrote {_shown(path)}")
    for problem in problems:
        print(f"INVARIANT BROKEN: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
