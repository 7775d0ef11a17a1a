"""Export this install's turns as a fleet trace (JSON lines) for ``make bench-fleet``.

    manage.py export_trace --since 2030-01-07 [--until ...] [--output trace.jsonl]

The format is the fleet benchmark's, version 2 (docs/benchmarks.md, "The trace
format"): the fleet on the first line, then one turn per line. What the install
knows goes in: its Anthropic subscriptions registered before ``--until`` (name, plan
type; ``added_at`` when registered during the span; for each window the utilization
and reset of the last reading at or before ``--since``; the first ``invalid_token``
reading after which none answered as revocation), the agents that ran turns (model,
the plan they started the span on; one per agent, not per name: two owners' "bot" are
``bot@alice`` and ``bot@bob``) and every turn (instant, agent, tokens, trigger,
its model when it differs). The install keeps a turn's total, not its requests, so
each turn is written as one request at its start. What it cannot know is left out
and the bench fills it in: plan capacities (by plan type) and a plan deleted since
(its row is gone). The key is priced per model family at list prices, or at one
``--key-usd-per-mtok`` for every model when that is given. A turn that failed before
it spent anything is given the median of the served turns' tokens, so demand the
install saw still counts. Writes no secret: names only.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, time
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_date, parse_datetime

from agents.models import Agent
from execution.models import Execution
from subscriptions.models import HeadroomSample, Subscription
from trinity import clock

FORMAT_VERSION = 2
PROVIDER = "anthropic"
# The key's list prices per model family, $ per Mtok: bench/fleet/trace.py's
# LIST_PRICES, written out because bench/ is not in the backend image (a test
# holds the two equal).
LIST_PRICES: dict[str, float] = {"opus": 25.0, "sonnet": 5.0, "haiku": 5.0 / 3}
DEFAULT_TOKENS = 25_000
ANSWERED = ("ok", "rate_limited")


def parse_instant(value: str, *, option: str) -> datetime:
    """An aware instant from an ISO date or datetime (a bare date is midnight UTC)."""
    try:
        day = parse_date(value)
        parsed = datetime.combine(day, time(), tzinfo=UTC) if day else parse_datetime(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise CommandError(f"{option}: not an ISO-8601 date or datetime: {value!r}")
    if parsed.tzinfo is None:
        raise CommandError(f"{option}: give a timezone (e.g. {value}Z or {value}+00:00)")
    return parsed


def _windows_at(subscription: Subscription, since: datetime) -> dict[str, dict[str, Any]]:
    sample = (
        HeadroomSample.objects.filter(
            subscription=subscription, fetched_at__lte=since, status__in=ANSWERED
        )
        .order_by("-fetched_at")
        .first()
    )
    if sample is None:
        return {}
    windows: dict[str, dict[str, Any]] = {}
    for name, window in (sample.windows or {}).items():
        if not isinstance(window, dict):
            continue
        entry: dict[str, Any] = {}
        if isinstance(window.get("utilization"), int | float):
            entry["utilization"] = float(window["utilization"])
        if isinstance(window.get("resets_at"), str):
            entry["resets_at"] = window["resets_at"]
        windows[name] = entry
    return windows


def _revoked_at(subscription: Subscription, since: datetime, until: datetime) -> str | None:
    """The first ``invalid_token`` reading in the span after which nothing answered."""
    samples = HeadroomSample.objects.filter(
        subscription=subscription, fetched_at__gte=since, fetched_at__lt=until
    ).order_by("fetched_at")
    revoked: datetime | None = None
    for fetched_at, status in samples.values_list("fetched_at", "status"):
        if status == "invalid_token":
            revoked = revoked or fetched_at
        elif status in ANSWERED:
            revoked = None
    return revoked.isoformat() if revoked is not None else None


def _starting_plan(first: Execution, agent: Agent | None, names: dict[int, str]) -> str | None:
    """The plan the agent was on when the span began: its first turn's assigned
    attempt, else its assignment now."""
    for attempt in first.attempts or []:
        if (
            isinstance(attempt, dict)
            and attempt.get("why") == "assigned"
            and attempt.get("credential_kind") == "subscription"
        ):
            name = names.get(attempt.get("subscription_id") or -1)
            if name is not None:
                return name
        break
    if agent is not None and agent.subscription_id in names:
        return names[agent.subscription_id]
    return None


TraceKey = tuple[int | None, str]


def _trace_key(execution: Execution) -> TraceKey:
    """Which trace agent a turn is: its agent (by id: names are unique per owner only,
    and two owners' "bot" are two agents), or, once the agent is deleted, the name it
    ran under."""
    if execution.agent_id is not None:
        return (execution.agent_id, "")
    return (None, execution.agent_name)


def _trace_names(executions: list[Execution]) -> dict[TraceKey, str]:
    """Each trace agent's name (the bench needs them unique): the agent's name, or,
    where several agents of the span share it, ``name@owner`` (``@`` is in no agent's
    name), and ``name (deleted)`` for a deleted agent's turns."""
    named: dict[TraceKey, tuple[str, str]] = {}
    for e in executions:
        key = _trace_key(e)
        if key not in named:
            agent = e.agent
            named[key] = (agent.name, agent.owner.get_username()) if agent else (e.agent_name, "")
    uses = Counter(name for name, _ in named.values())
    return {
        key: name if uses[name] == 1 else f"{name}@{owner}" if owner else f"{name} (deleted)"
        for key, (name, owner) in named.items()
    }


def _trace_agents(
    executions: list[Execution], names: dict[int, str]
) -> dict[TraceKey, dict[str, Any]]:
    """One trace agent per agent, described by its first turn in the range; ``names``
    are the plans registered when the span starts."""
    labels = _trace_names(executions)
    agents: dict[TraceKey, dict[str, Any]] = {}
    for execution in executions:
        key = _trace_key(execution)
        if key in agents:
            continue
        agent = execution.agent
        model = (agent.model if agent is not None else "") or execution.model or "unknown"
        agents[key] = {
            "name": labels[key],
            "model": model,
            "subscription": _starting_plan(execution, agent, names),
        }
    return agents


def _added_at(subscription: Subscription, since: datetime) -> str | None:
    """When the plan was registered, if that was during the span."""
    return subscription.created_at.isoformat() if subscription.created_at > since else None


def trace_lines(
    *, since: datetime, until: datetime, key_usd_per_mtok: float | None
) -> Iterable[dict[str, Any]]:
    """The fleet line, then one line per turn created in [since, until)."""
    subscriptions = list(
        Subscription.objects.filter(provider=PROVIDER, created_at__lt=until).order_by("name")
    )
    # An agent can only start the span on a plan registered by then.
    names = {s.pk: s.name for s in subscriptions if s.created_at <= since}
    executions = list(
        Execution.objects.filter(created_at__gte=since, created_at__lt=until)
        .select_related("agent__owner")
        .order_by("created_at", "pk")
    )
    served = [e.input_tokens + e.output_tokens for e in executions]
    spent = [t for t in served if t > 0]
    fallback = int(statistics.median(spent)) if spent else DEFAULT_TOKENS
    agents = _trace_agents(executions, names)
    fleet: dict[str, Any] = {
        "type": "fleet",
        "version": FORMAT_VERSION,
        "name": f"export-{since:%Y%m%d}",
        "description": f"exported from this install: turns from {since.isoformat()} "
        f"to {until.isoformat()}",
        "seed": None,
        "start": since.isoformat(),
        "end": until.isoformat(),
        "subscriptions": [
            {
                "name": s.name,
                "provider": s.provider,
                "plan_type": s.plan_type,
                "added_at": _added_at(s, since),
                "revoked_at": _revoked_at(s, since, until),
                "windows": _windows_at(s, since),
            }
            for s in subscriptions
        ],
        "agents": list(agents.values()),
    }
    if key_usd_per_mtok is not None:
        fleet["key_usd_per_mtok"] = key_usd_per_mtok
    else:
        fleet["key_prices"] = LIST_PRICES
    yield fleet
    for execution, tokens in zip(executions, served, strict=True):
        counted = tokens if tokens > 0 else fallback
        agent = agents[_trace_key(execution)]
        line: dict[str, Any] = {
            "type": "turn",
            "at": execution.created_at.isoformat(),
            "agent": agent["name"],
            "tokens": counted,
            "trigger": execution.trigger,
        }
        if execution.model and execution.model != agent["model"]:
            line["model"] = execution.model
        line["requests"] = [[0, counted]]
        yield line


class Command(BaseCommand):
    help = "Write this install's turns since an instant as a fleet trace (JSON lines)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", required=True, help="ISO date or datetime (inclusive)")
        parser.add_argument("--until", help="ISO date or datetime (exclusive; default: now)")
        parser.add_argument("--output", help="file to write (default: standard output)")
        parser.add_argument(
            "--key-usd-per-mtok",
            type=float,
            help="the platform key's price per million tokens for every model "
            "(default: list prices per model family)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        since = parse_instant(options["since"], option="--since")
        until = (
            parse_instant(options["until"], option="--until") if options["until"] else clock.now()
        )
        if until <= since:
            raise CommandError("--until must be after --since")
        price = options["key_usd_per_mtok"]
        if price is not None and price < 0:
            raise CommandError("--key-usd-per-mtok must be >= 0")
        lines = trace_lines(since=since, until=until, key_usd_per_mtok=price)
        output = options["output"]
        if output:
            with open(output, "w", encoding="utf-8") as handle:
                count = _write(lines, handle)
            self.stderr.write(f"wrote {count} turn(s) to {output}")
        else:
            _write(lines, sys.stdout if self.stdout is None else self.stdout)


def _write(lines: Iterable[dict[str, Any]], handle: IO[str] | Any) -> int:
    turns = -1
    for line in lines:
        handle.write(json.dumps(line, separators=(",", ":")) + "\n")
        turns += 1
    return max(turns, 0)
