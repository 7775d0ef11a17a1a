"""Stop every agent server recorded in the database, through the normal lifecycle.

Agent servers outlive the web and worker processes by design (a restarted web process
finds them again), so stopping `make run` does not stop them; this does, and `make
run` calls it on exit. Each agent ends up `stopped`, and its next turn starts it again.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from agents import lifecycle
from agents.models import Agent, ProcessState

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Stop every agent server recorded in the database (the embedded default's `make stop`)."

    def handle(self, *args: Any, **options: Any) -> None:
        recorded = Agent.objects.filter(
            Q(process_state=ProcessState.RUNNING) | ~Q(process_handle="")
        ).order_by("name")
        failed: list[str] = []
        for agent in recorded:
            try:
                lifecycle.agent_stop(agent=agent)
            except Exception:
                # One agent that will not stop must not keep the others up; its
                # traceback goes to the (redacted) log, and the command fails at the end.
                logger.exception("agent %s: not stopped", agent.name)
                failed.append(agent.name)
                continue
            self.stdout.write(f"agent {agent.name}: stopped")
        if failed:
            raise CommandError(f"{len(failed)} agent(s) not stopped: {', '.join(failed)}")
