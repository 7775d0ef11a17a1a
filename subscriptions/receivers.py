from __future__ import annotations

from typing import Any

from agents.models import Agent
from subscriptions.headroom.selection import assignment_auto
from trinity import clock


def auto_assign_new_agent(
    sender: type[Agent], *, agent: Agent, auto_assign: bool, **_: Any
) -> None:
    """A new agent without a subscription gets the best-ranked one of its provider."""
    if auto_assign and agent.subscription_id is None:
        assignment_auto(agent=agent, now=clock.now())
