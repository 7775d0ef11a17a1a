"""``manage.py routing_explain NAME [--owner USERNAME] [--autonomous] [--model M]
[--session S] [--json]``: where the agent's next turn would run and why, for a shell
without the panel.

Names are unique per owner: NAME is the only agent of that name, or the one of
``--owner``; when several owners have one, the command says so and names them.

The same explanation as ``GET /api/agents/{name}/routing`` (``execution.explain``);
it reads the database and the cache only, never probes and writes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.models import Agent
from agents.selectors import agent_only
from execution.explain.explanation import routing_explain
from execution.explain.text import explanation_text
from trinity import clock
from trinity.errors import Ambiguous, NotFound


class Command(BaseCommand):
    help = "Explain where an agent's next turn would run, and why."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the agent's name")
        parser.add_argument(
            "--owner", default=None, help="the agent's owner, when several owners use the name"
        )
        parser.add_argument(
            "--autonomous", action="store_true", help="explain a schedule/agent/mcp turn"
        )
        parser.add_argument("--model", default="", help="explain a turn on this model")
        parser.add_argument("--session", default="", help="explain a turn of this chat session")
        parser.add_argument("--json", action="store_true", help="print the explanation as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        agent = _agent(options["name"], owner=options["owner"])
        explanation = routing_explain(
            agent=agent,
            now=clock.now(),
            autonomous=options["autonomous"],
            model=options["model"],
            session_id=options["session"],
        )
        if options["json"]:
            self.stdout.write(json.dumps(explanation.as_json(), indent=2))
            return
        for line in explanation_text(explanation):
            self.stdout.write(line)


def _agent(name: str, *, owner: str | None) -> Agent:
    """The one agent ``name`` (of ``owner``) means, among every owner's (the API's
    rule for an admin with no agent of that name, ``agents.selectors.agent_only``);
    CommandError naming the owners to choose from when several have one."""
    agents = Agent.objects.select_related("subscription", "owner").filter(name=name)
    if owner is not None:
        agents = agents.filter(owner__username=owner)
    try:
        return agent_only(list(agents[:100]), name=name, pick="add --owner USERNAME")
    except NotFound:
        whose = f" owned by {owner!r}" if owner is not None else ""
        raise CommandError(f"No agent named {name!r}{whose}.") from None
    except Ambiguous as exc:
        raise CommandError(str(exc)) from None
