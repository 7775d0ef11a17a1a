"""The LP's flows rounded to agents: one place per agent (a plan, or the key) per slot
of the first day, with hysteresis.

Slot by slot, per model family, the plans' flows are budgets. An agent stays where it
is while its place has budget for about its forecast (``FIT`` of it), so an agent
moves only when the plan moves it; the rest, largest first, go to the plan with the
most budget left, else to the key when the key is planned to take that family's
turns (the spill), else stay (the plan is over, and the turn's own rules will walk).
An agent with no forecast gets no entry: its turns keep today's rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from routing.plan_ahead.flows import FINE_FOR, Flows
from routing.plan_ahead.inputs import AgentDemand

KEY_PLACE = 0  # the key's place id (subscription ids are positive)
FIT = 0.5  # a place with budget for this share of the agent's forecast may take it


@dataclass(frozen=True)
class Route:
    """An agent's place now and the instant the plan first moves it (or the end of the
    planned day)."""

    agent: AgentDemand
    place: int
    until: datetime


def _fine_slots(flows: Flows) -> int:
    start = flows.starts[0]
    return sum(1 for s in flows.starts if s - start < FINE_FOR) if flows.starts else 0


def routes_of(flows: Flows, agents: tuple[AgentDemand, ...]) -> list[Route]:
    """Each forecast agent's place now and until when (module docstring)."""
    plan_index = {pk: i for i, pk in enumerate(flows.plan_ids)}
    family_index = {f: i for i, f in enumerate(flows.families)}
    forecast = [a for a in agents if a.hourly and any(a.hourly)]
    place: dict[int, int] = {}
    for agent in forecast:
        if agent.assigned in plan_index:
            place[agent.id] = agent.assigned
        else:
            place[agent.id] = -1  # nowhere yet: the first slot places it
    first: dict[int, int] = {}
    until: dict[int, datetime] = {}
    slots = _fine_slots(flows)
    for s in range(slots):
        chosen = _slot(flows, s, forecast, place, plan_index, family_index)
        for agent in forecast:
            pk = chosen[agent.id]
            if s == 0:
                first[agent.id] = pk
            elif agent.id not in until and pk != first[agent.id]:
                until[agent.id] = flows.starts[s]
            place[agent.id] = pk
    end = flows.ends[slots - 1] if slots else flows.starts[0]
    return [
        Route(agent, first[agent.id], until.get(agent.id, end))
        for agent in forecast
        if first.get(agent.id, -1) != -1
    ]


def _slot(
    flows: Flows,
    s: int,
    agents: list[AgentDemand],
    place: Mapping[int, int],
    plan_index: Mapping[int, int],
    family_index: Mapping[str | None, int],
) -> dict[int, int]:
    chosen: dict[int, int] = {}
    hours = (flows.ends[s] - flows.starts[s]).total_seconds() / 3600
    for family, f in family_index.items():
        budget = {pk: float(flows.on_plans[s, f, i]) for pk, i in plan_index.items()}
        key = float(flows.on_key[s, f])
        mine = sorted(
            (a for a in agents if a.family == family),
            key=lambda a: (-a.at(flows.starts[s]), a.id),
        )
        waiting = []
        for agent in mine:
            need = agent.at(flows.starts[s]) * hours
            here = place[agent.id]
            if need <= 0 and here != -1:
                chosen[agent.id] = here
            elif here == KEY_PLACE and key >= FIT * need:
                chosen[agent.id], key = here, key - need
            elif here in budget and budget[here] >= FIT * need:
                chosen[agent.id] = here
                budget[here] -= need
            else:
                waiting.append((agent, need))
        for agent, need in waiting:
            best = max(budget, key=lambda pk: (budget[pk], -pk), default=None)
            if best is not None and budget[best] >= FIT * need:
                chosen[agent.id] = best
                budget[best] -= need
            elif key >= FIT * need and key > 0:
                chosen[agent.id], key = KEY_PLACE, key - need
            elif place[agent.id] != -1:
                chosen[agent.id] = place[agent.id]
            elif best is not None:
                chosen[agent.id] = best
            else:
                chosen[agent.id] = KEY_PLACE
    return chosen


def spill_ranges(flows: Flows, *, share: float = 0.01) -> list[tuple[int, int, int]]:
    """``(family index, first slot, last slot)`` runs where the key takes more than
    ``share`` of a family's forecast."""
    runs: list[tuple[int, int, int]] = []
    for f in range(len(flows.families)):
        taking = flows.on_key[:, f] > share * np.maximum(flows.demand[:, f], 1.0)
        s = 0
        while s < len(taking):
            if taking[s]:
                begin = s
                while s + 1 < len(taking) and taking[s + 1]:
                    s += 1
                runs.append((f, begin, s))
            s += 1
    return runs
