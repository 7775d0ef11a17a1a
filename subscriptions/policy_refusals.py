"""The routing policy's verdicts (``routing/policy.py``) in the shapes the dispatch loop
and the explainer read: why an agent may not leave its assignment, why it may not run
with none, and the operator's sentence for it. Thin adapters, kept with their
signatures: new code asks the verdicts.
"""

from __future__ import annotations

from agents.models import Agent
from routing import policy
from routing.walk import Stop
from trinity.models import SystemSettings


def switching_stop(*, agent: Agent, system: SystemSettings) -> Stop | None:
    """Why ``agent``'s turns may not leave its assignment at all, or None: the leave
    verdict (``policy.agent_leave_verdict``: auto-switch is off, or the agent is
    pinned) as the walk's stop. Pre-dispatch and the walk both stop on it. A thin
    adapter: new code asks the verdict."""
    refusal = policy.agent_leave_verdict(agent, system).refusal
    return None if refusal is None else Stop(refusal.value)


def assignment_policy_refusal(agent: Agent) -> str:
    """Why ``agent``'s policy forbids its turns when it has no assignment at all, or ""
    when it may run (``policy.agent_start_verdict``), in the operator's words. An
    assignment's own verdict is ``admit``'s (``plan_facts``). The text names no secret."""
    if agent.subscription_id is not None:
        return ""
    refusal = policy.agent_start_verdict(agent).refusal
    if refusal is None:
        return ""
    return plan_refusal_text(refusal)


def plan_refusal_text(refusal: policy.PlanRefusal) -> str:
    """The operator's sentence for the policy's refusal of a turn with no plan."""
    return (
        "its routing policy is subscription-only and it has no subscription; "
        "it never bills the platform API key"
    )
