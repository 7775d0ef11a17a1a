"""Session affinity: a chat turn starts on the credential that served its session's
previous turn while that credential is eligible, so the session's prompt cache on
that account stays warm.

The decision is ``routing.policy.affinity_target`` (pure); eligibility of the
plan is ``admit``'s on ``subscriptions.plan_facts.session_plan_read``; the planner
(``routing/planner/plan.py::_affinity``) spends the reads only on chat turns
that carry a session id. A turn served by
affinity on a plan other than the assignment commits no switch: sessions of one agent
on two plans would otherwise flip its assignment back and forth.
"""

from __future__ import annotations

from datetime import datetime

from agents.models import Agent
from execution.models import Execution, Status


def session_previous_credential(
    *, agent: Agent, session_id: str, before: datetime
) -> tuple[str, int | None] | None:
    """What served the latest succeeded turn of chat session ``session_id`` created
    before ``before``: ``(served_by_kind, subscription id)``; None for a new session.

    One query on the agent's (agent_name, created_at) index, read newest first: a
    session's previous turn is normally among the agent's latest, so the scan stops
    early without an index of its own.
    """
    return (
        Execution.objects.filter(
            agent_name=agent.name,
            # The agent itself, not only its name: a new agent that reuses a deleted
            # one's name (and a session id it knew) inherits none of its sessions.
            agent_id=agent.pk,
            session_id=session_id,
            status=Status.SUCCEEDED,
            created_at__lt=before,
        )
        .order_by("-created_at")
        .values_list("served_by_kind", "served_by_subscription_id")
        .first()
    )
