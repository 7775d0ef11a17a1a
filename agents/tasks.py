"""Celery adapters for the agent lifecycle: take an id, call one service."""

from __future__ import annotations

from celery import shared_task

from agents import lifecycle
from agents.models import Agent, ProcessState

# An agent deleted between the enqueue and the run is not an error: there is nothing
# left to do.
GONE = "gone"


@shared_task(name="agents.apply_credentials", soft_time_limit=120, time_limit=150)
def apply_credentials(agent_id: int) -> str:
    agent = Agent.objects.filter(pk=agent_id).first()
    return GONE if agent is None else lifecycle.agent_apply_credentials(agent=agent)


@shared_task(name="agents.start", soft_time_limit=120, time_limit=150)
def start(agent_id: int) -> str:
    agent = Agent.objects.filter(pk=agent_id).first()
    return GONE if agent is None else lifecycle.agent_start(agent=agent).process_state


@shared_task(name="agents.restart", soft_time_limit=120, time_limit=150)
def restart(agent_id: int) -> str:
    """Recreate a running agent (its boot configuration changed); leave a stopped one."""
    agent = Agent.objects.filter(pk=agent_id, process_state=ProcessState.RUNNING).first()
    return "not_running" if agent is None else lifecycle.agent_recreate(agent=agent).process_state


@shared_task(name="agents.supervise", soft_time_limit=240, time_limit=300)
def supervise() -> list[str]:
    """Restart agents recorded as running whose server has died (a crash, a reboot)."""
    return lifecycle.agents_supervise()
