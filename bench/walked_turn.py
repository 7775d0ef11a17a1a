"""A turn that walks one rung: one refusal round trip plus ≤ 10 ms over a direct success.

    BENCH_DATABASE_URL=postgres://root@127.0.0.1:5432/trinity \\
    BENCH_REDIS_URL=redis://127.0.0.1:6379/3 \\
    .venv/bin/python bench/walked_turn.py [--turns 150] [--candidate PATH]

The fleet of bench/turn_overhead.py (500 subscriptions with fresh, serving headroom
readings, 200 agents on one real agent server, the simulator upstream, gunicorn with
deploy/gunicorn.conf.py). Before each walked turn its agent's plan is exhausted in
the simulator (5-hour window at 100 %): the readings still say it serves, so the
pre-dispatch check sends the turn as assigned, the plan refuses with a 429, and the
walk ranks the 499 others by headroom and serves on the best one: the refusal
recorded, the compare-and-set commit, the hot-reload enqueued, one notification.
Each agent walks once (its refusal then counts against that plan).

Side by side, interleaved in a rotating order, per agent:

- success: the agent server called directly with a serving plan's token;
- refusal: the agent server called directly with the exhausted token (the 429);
- walked: ``POST /api/agents/{name}/task`` through gunicorn.

Added = walked - success - refusal (medians; p99 reported with no target): what the
walk costs the backend beyond the round trips it cannot avoid. Bounded by ``--turns``
(at most 200 - warm-up: one per agent) and ``--max-seconds``; every process it starts
is stopped on the way out.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from _setup import (
    TURN_MESSAGE,
    Fleet,
    TurnRig,
    WebProcess,
    backends,
    boot,
    cpu_and_wall_profiles,
    direct_body,
    empty_redis,
    line,
    log_as_deployed,
    machine,
    quantile,
    throwaway_postgres,
    turn_backends,
    turn_rig,
    wsgi_turn,
)

SUBSCRIPTIONS = 500
AGENTS = 200
WARMUP = 10
TARGET_ADDED_MS = 10.0

Step = Callable[[int], None]  # one timed call, given the index of the agent it is for
Labelled = tuple[str, Step]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=150, help="measured walked turns")
    parser.add_argument("--max-seconds", type=float, default=150.0, help="measurement cap")
    parser.add_argument(
        "--profile", type=int, default=0, help="in-process walked turns profiled (fresh agents)"
    )
    parser.add_argument(
        "--candidate",
        action="append",
        type=Path,
        default=[],
        help="also measure a web run from this checkout (a proposed change); repeatable",
    )
    args = parser.parse_args()
    turns = min(args.turns, (AGENTS - WARMUP - args.profile) // (1 + len(args.candidate)))
    database_url, redis_url = turn_backends()
    with throwaway_postgres(database_url) as bench_db, empty_redis(redis_url):
        workdir = boot(database_url=bench_db, redis_url=redis_url)
        run(
            workdir,
            turns=turns,
            max_seconds=args.max_seconds,
            candidates=args.candidate,
            profiled=args.profile,
        )


def run(
    workdir: Path, *, turns: int, max_seconds: float, candidates: list[Path], profiled: int
) -> None:
    with ExitStack() as stack:
        rig = stack.enter_context(turn_rig(workdir, subscriptions=SUBSCRIPTIONS, agents=AGENTS))
        webs = {"web": rig.web("web"), **rig.candidates(candidates)}
        for web in webs.values():
            stack.enter_context(web)
        assigned_plans_exhausted(rig)
        steps = turn_steps(stack, rig, webs)
        samples, next_agent = interleaved(steps, list(webs), turns=turns, max_seconds=max_seconds)
        report(samples, list(webs))
        if profiled:
            profile(rig.fleet, first=next_agent, count=profiled)
        print(f"  (logs under {workdir})")


def assigned_plans_exhausted(rig: TurnRig) -> None:
    """The plans the agents start on refuse, though their last readings (fresh, at
    97 %) say they still serve: they ran out since. The 300 never assigned serve,
    with more headroom than those, so the walk's first pick serves."""
    exhausted_readings(rig.fleet, now=datetime.now(tz=UTC))
    for _, _, token in rig.fleet.agents:
        rig.sim.control.register(token, kind="oauth")
        rig.sim.control.set_usage(token, "five_hour", percent=100)
    placement_looked()


def placement_looked() -> None:
    """Every agent's placement look claimed, as for an agent looked at minutes ago:
    otherwise placement moves a turn to a plan with more headroom before dispatch, and
    no turn walks (the walk is what this bench measures)."""
    from agents.models import Agent
    from subscriptions.placement_look import placement_due

    for pk in Agent.objects.values_list("pk", flat=True):
        placement_due(pk)


def turn_steps(stack: ExitStack, rig: TurnRig, webs: dict[str, WebProcess]) -> list[Labelled]:
    """The interleaved steps, each given an agent's index: a direct success, a direct
    refusal, and a walked turn through each web; their clients closed with ``stack``."""
    fleet = rig.fleet
    direct = httpx.Client(
        base_url=rig.server.base_url,
        headers={"Authorization": f"Bearer {rig.secret}"},
        timeout=30.0,
        trust_env=False,
    )
    stack.callback(direct.close)
    serving = fleet.tokens[max(fleet.tokens)]

    def success(_: int) -> None:
        response = direct.post("/api/task", json=direct_body(token=serving))
        if response.status_code != 200:
            raise SystemExit(f"direct success answered {response.status_code}")

    def refusal(index: int) -> None:
        response = direct.post("/api/task", json=direct_body(token=fleet.agents[index][2]))
        if response.status_code != 429:
            raise SystemExit(f"direct refusal answered {response.status_code}")

    steps: list[Labelled] = [("success", success), ("refusal", refusal)]
    for label, web in webs.items():
        client = httpx.Client(
            base_url=web.base_url,
            headers={"Authorization": f"Token {fleet.api_token}"},
            timeout=60.0,
            trust_env=False,
        )
        stack.callback(client.close)
        steps.append((label, walker(client, fleet)))
    return steps


def walker(client: httpx.Client, fleet: Fleet) -> Step:
    """A walked turn through ``client``'s web: it must walk exactly one rung and commit."""

    def walked(index: int) -> None:
        name = fleet.agents[index][0]
        response = client.post(f"/api/agents/{name}/task", json={"message": TURN_MESSAGE})
        body = response.json()
        switch = body.get("subscription_switch") or {}
        if response.status_code != 200 or not switch.get("committed"):
            raise SystemExit(f"walked turn answered {response.status_code}: {body}")
        if [a["outcome"] for a in body["attempts"]] != ["refused", "served"]:
            raise SystemExit(f"walked turn did not walk one rung: {body['attempts']}")

    return walked


def interleaved(
    steps: list[Labelled], webs_labels: list[str], *, turns: int, max_seconds: float
) -> tuple[dict[str, list[float]], int]:
    """Wall ms per step label over WARMUP + ``turns`` rounds (the warm-up dropped), the
    order rotating each round, within ``max_seconds``; and the first agent not walked."""
    samples: dict[str, list[float]] = {label: [] for label, _ in steps}
    deadline = time.monotonic() + max_seconds
    next_agent = 0
    for i in range(WARMUP + turns):
        if time.monotonic() > deadline:
            print(f"  stopped at the {max_seconds:g} s cap after {i - WARMUP} turns")
            break
        # Each web walks an agent of its own: an agent walks once.
        agent_of = {label: next_agent + k for k, label in enumerate(webs_labels)}
        next_agent += len(webs_labels)
        shift = i % len(steps)
        for label, step in steps[shift:] + steps[:shift]:
            index = agent_of.get(label, agent_of[webs_labels[0]])
            start = time.perf_counter()
            step(index)
            elapsed = (time.perf_counter() - start) * 1000
            if i >= WARMUP:
                samples[label].append(elapsed)
    return samples, next_agent


def exhausted_readings(fleet: Fleet, *, now: datetime) -> None:
    from routing.headroom.reading import Reading, ReadingStatus, WindowReading
    from subscriptions.headroom.store import snapshots_write

    five = WindowReading(97.0, now + timedelta(hours=1), "allowed_warning")
    seven = WindowReading(70.0, now + timedelta(days=3), "allowed")
    snapshots_write(
        {
            subscription_id: Reading(
                fetched_at=now - timedelta(minutes=5),
                status=ReadingStatus.OK,
                windows={"five_hour": five, "seven_day": seven},
                source="probe",
            )
            for _, subscription_id, _ in fleet.agents
        }
    )


def profile(fleet: Fleet, *, first: int, count: int) -> None:
    """Walked turns of agents that have not walked yet, through the WSGI application in
    this process (logging as deployed): one turn's queries, then cProfile."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    log_as_deployed()
    names = [name for name, _, _ in fleet.agents[first : first + count + 1]]

    def walk(name: str) -> None:
        status, payload = wsgi_turn(name, fleet.api_token)
        if status != 200 or len(payload["attempts"]) != 2:  # type: ignore[arg-type]
            raise SystemExit(f"in-process walked turn answered {status}: {payload}")

    with CaptureQueriesContext(connection) as queries:
        walk(names[0])
    print(f"  in-process walked turn: {len(queries)} SQL statements")
    for query in queries.captured_queries:
        print(f"    {query['time']}s  {query['sql'][:110]}")
    rest = names[1:]
    half = len(rest) // 2
    cpu_start = time.thread_time()
    for name in rest[:half]:
        walk(name)
    cpu = (time.thread_time() - cpu_start) * 1000 / max(half, 1)
    print(line("  in-process: this thread's CPU per walked turn (unprofiled)", cpu, None, "ms"))
    todo = iter(rest[half:])

    def walked() -> None:
        for _ in range((len(rest) - half) // 2):
            walk(next(todo))

    print(cpu_and_wall_profiles(walked, title="in-process walked turns"))


def report(samples: dict[str, list[float]], webs: list[str]) -> None:
    n = len(samples["success"])
    print(
        f"bench/walked_turn.py: {SUBSCRIPTIONS} subscriptions, {AGENTS} agents; {backends()}; "
        f"gunicorn (1 worker); {n} interleaved walked turns; {machine()}"
    )
    s50, r50 = statistics.median(samples["success"]), statistics.median(samples["refusal"])
    s99, r99 = quantile(samples["success"], 0.99), quantile(samples["refusal"], 0.99)
    print(f"  direct success: median {s50:.2f} ms, p99 {s99:.2f} ms")
    print(f"  direct refusal (the 429 round trip): median {r50:.2f} ms, p99 {r99:.2f} ms")
    for label in webs:
        w50, w99 = statistics.median(samples[label]), quantile(samples[label], 0.99)
        print(f"  {label}, walked one rung: median {w50:.2f} ms, p99 {w99:.2f} ms")
        added = w50 - s50 - r50
        print(line(f"  {label}: added beyond both, median", added, TARGET_ADDED_MS, "ms"))
        print(line(f"  {label}: added beyond both, p99", w99 - s99 - r99, None, "ms"))


if __name__ == "__main__":
    main()
