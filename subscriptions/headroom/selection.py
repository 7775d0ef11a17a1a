"""Where an agent may go, asked of its row outside a turn: the auto-assignment of a new
agent, the benchmarks, the tests. A turn asks with its own facts instead
(``execution/gathering.py``); both read the same selection (``plan_facts.selection_read``:
every plan of the provider judged by ``routing.eligibility.admit``, the admitted ones
ranked by cached headroom). Nothing here probes or decides.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from agents.models import Agent
from routing.eligibility import Admission
from routing.headroom.alternatives import Selection
from routing.headroom.windows import family_window
from subscriptions.plan_facts import fresh_for, selection_read, skip_window
from trinity.selectors import system_settings_get

logger = logging.getLogger(__name__)


def agent_admission(
    agent: Agent,
    *,
    now: datetime,
    tried: Iterable[int] = (),
    model: str | None = None,
    at_capacity: Iterable[int] = (),
) -> Admission:
    """What ``admit`` reads of a turn of ``agent`` on ``model`` (None: the agent's) at
    ``now``, from its row and the settings: its policy, its assignment, the model's
    family, the freshness and skip windows; ``tried``, ``at_capacity``: plans out of
    this selection."""
    return Admission(
        now=now,
        provider=agent.provider,
        routing_policy=agent.routing_policy,
        origin=agent.subscription_id,
        family=family_window(model or agent.model),
        max_age=fresh_for(),
        skip_window=skip_window(),
        tried=frozenset(tried),
        at_capacity=frozenset(at_capacity),
    )


def rank_alternatives(
    *,
    agent: Agent,
    exclude_ids: Iterable[int] = (),
    now: datetime,
    model: str | None = None,
    strategy: str | None = None,
) -> Selection:
    """The subscriptions ``agent`` could run on instead of its own, best first, and why
    every other plan of its provider is not among them.

    Judged and ranked for ``model``'s family (the turn's model; None: the agent's), with
    ``strategy`` (None: the system setting ``routing_strategy``). ``exclude_ids``: the
    plans a walk already tried. Never probes and never raises for a store outage.
    """
    if strategy is None:
        strategy = system_settings_get().routing_strategy
    admission = agent_admission(agent, now=now, tried=exclude_ids, model=model)
    return selection_read(admission, strategy=strategy)


@dataclass(frozen=True)
class AutoAssignment:
    agent: Agent
    assigned: bool
    subscription_id: int | None
    selection: Selection | None


@transaction.atomic
def assignment_auto(*, agent: Agent, now: datetime) -> AutoAssignment:
    """Give an unassigned agent the best-ranked subscription of its provider.

    The same ranker as a walk: the first ranked candidate, else the first
    last-resort one (a skip-listed plan may recover; no plan at all never does).
    Compare-and-set: an agent that got a subscription meanwhile is left alone.
    Returns what happened; changes only the agent's subscription.
    """
    if agent.subscription_id is not None:
        return AutoAssignment(agent, False, agent.subscription_id, None)
    selection = rank_alternatives(agent=agent, now=now)
    order = selection.order()
    if not order:
        return AutoAssignment(agent, False, None, selection)
    choice = order[0]
    claimed = Agent.objects.filter(pk=agent.pk, subscription__isnull=True).update(
        subscription_id=choice
    )
    if claimed != 1:
        agent.refresh_from_db(fields=["subscription"])
        return AutoAssignment(agent, False, agent.subscription_id, selection)
    agent.subscription_id = choice
    logger.info(
        "agent %s auto-assigned to subscription %d: %s", agent.name, choice, selection.reason()
    )
    return AutoAssignment(agent, True, choice, selection)
