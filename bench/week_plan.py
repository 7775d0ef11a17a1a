"""``python -m bench.week_plan``: the planning task's solve on a large pool.

50 plans of three sizes (Pro, Max 5x, Max 20x, windows part used, resets spread over
their periods) and 200 agents with hour-of-week profiles over three model families,
demand about what the plans can serve; prints the CPU seconds of ``plan_week`` (the
issue's target: <= 2 s on this machine), best of ``--repeat``, and what it planned.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime, timedelta

from routing.plan_ahead.inputs import (
    HOURS_OF_WEEK,
    AgentDemand,
    PlanState,
    WeekInputs,
    nominal_capacity,
    window_state,
)
from routing.plan_ahead.solve import plan_week

NOW = datetime(2030, 1, 9, 10, 17, tzinfo=UTC)
PRICES = {"opus": 25.0, "sonnet": 5.0, "haiku": 5.0 / 3, None: 5.0}
WINDOWS = {"five_hour": 5, "seven_day": 168, "seven_day_opus": 168, "seven_day_sonnet": 168}


def pool(plans: int, agents: int, *, seed: int, load: float) -> WeekInputs:
    rng = random.Random(seed)
    states = []
    for pk in range(1, plans + 1):
        kind = rng.choice(("pro", "max-5x", "max-5x", "max-20x"))
        windows = []
        for name, hours in WINDOWS.items():
            state = window_state(
                name,
                utilization=rng.uniform(0, 80),
                resets_at=NOW + timedelta(hours=rng.uniform(0.1, hours)),
                capacity=nominal_capacity(kind, name),
                now=NOW,
            )
            assert state is not None
            windows.append(state)
        states.append(PlanState(pk, f"plan-{pk}", tuple(windows)))
    weekly = sum(w.capacity for p in states for w in p.windows if w.name == "seven_day")
    per_agent_hour = load * weekly / agents / HOURS_OF_WEEK
    people = []
    for pk in range(1, agents + 1):
        family = rng.choice(("opus", "sonnet", "sonnet", "haiku"))
        office = rng.choice((8, 15))
        hourly = tuple(
            per_agent_hour * (2.2 if office <= h % 24 < office + 9 and h < 120 else 0.3)
            for h in range(HOURS_OF_WEEK)
        )
        people.append(AgentDemand(pk, f"agent-{pk}", family, rng.randint(1, plans), hourly))
    return WeekInputs(NOW, tuple(states), tuple(people), PRICES)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.week_plan", description=__doc__)
    parser.add_argument("--plans", type=int, default=50)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--load", type=float, default=1.1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    inputs = pool(args.plans, args.agents, seed=1, load=args.load)
    best, week = float("inf"), None
    for _ in range(args.repeat):
        began = time.process_time()
        week = plan_week(inputs)
        best = min(best, time.process_time() - began)
    assert week is not None
    on_key = sum(1 for p in week.placements if p.on_key)
    print(
        f"plan_week: {args.plans} plans x {args.agents} agents, load {args.load}: "
        f"{best:.2f} s CPU (best of {args.repeat}; target <= 2 s); {week.status}; "
        f"planned key ${week.key_usd:.2f} over the week; {on_key} agents on the key now; "
        f"{len(week.spill)} spill runs"
    )


if __name__ == "__main__":
    main()
