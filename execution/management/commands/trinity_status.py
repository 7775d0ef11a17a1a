"""``manage.py trinity_status``: the fleet at a glance, for a shell without the panel.

One table of every subscription (each window's utilization and reset, the headroom
tier, whether it is rate limited now and on what evidence, refusals in the skip
window and in 24h, its agents) and one of every agent (its assignment, process state,
last switch and why). It reads through the API's own selectors
(``subscription_pressure_list``, ``agents_visible_to``), so the shell and the panel
cannot disagree; tokens never appear (only the subscriptions' names).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from agents.models import Agent
from agents.selectors import agents_visible_to
from execution.selectors import refusal_counts_since
from subscriptions.headroom.selectors import PressureRow, subscription_pressure_list
from subscriptions.selectors import skip_window_start
from trinity import clock

WINDOWS = (("five_hour", "5h"), ("seven_day", "7d"))


class ShellOperator(AnonymousUser):
    """Whoever runs manage.py can read the database anyway: they see the whole fleet."""

    @property
    def is_staff(self) -> bool:  # type: ignore[override]
        return True


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m"


def _window(row: PressureRow, name: str, now: datetime) -> str:
    reading = row.headroom.windows.get(name)
    if reading is None or reading.utilization is None:
        return "-"
    text = f"{reading.utilization:.0f}%"
    if reading.resets_at is not None:
        text += f" resets {reading.resets_at:%m-%d %H:%M}Z"
        if reading.resets_at > now:
            text += f" (in {_duration((reading.resets_at - now).total_seconds())})"
    return text


def _switch(agent: Agent, now: datetime) -> tuple[str, str]:
    switch: dict[str, Any] = agent.last_switch or {}
    if not switch:
        return "-", ""
    origin = switch.get("from_name") or (
        f"subscription #{switch['from']}" if switch.get("from") else "none"
    )
    target = switch.get("to_name") or f"subscription #{switch.get('to')}"
    at = parse_datetime(str(switch.get("at") or ""))
    when = f" {_duration((now - at).total_seconds())} ago" if at else ""
    return f"{origin} -> {target}{when}", str(switch.get("explanation") or "")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns as wide as their widest cell; the last one is not padded."""
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=False)]
    lines = []
    for cells in (headers, *rows):
        padded = [str(c).ljust(w) for c, w in zip(cells[:-1], widths, strict=False)]
        lines.append("  ".join([*padded, str(cells[-1])]).rstrip())
    return lines


class Command(BaseCommand):
    help = "Print every subscription's headroom and pressure and every agent's assignment."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--user", help="show what this user sees over the API (default: everything)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        now = clock.now()
        user: AbstractBaseUser | AnonymousUser = ShellOperator()
        if options.get("user"):
            found = get_user_model().objects.filter(username=options["user"]).first()
            if found is None:
                raise CommandError(f"No user {options['user']!r}.")
            user = found
        fleet = subscription_pressure_list(user=user, now=now)
        recent = refusal_counts_since(since=skip_window_start(now))
        out = self.stdout
        out.write(f"Trinity status at {now:%Y-%m-%d %H:%M:%S}Z")
        summary = fleet.summary
        out.write(
            f"{summary['subscriptions']} subscription(s): {summary['measured']} measured, "
            f"{summary['unknown']} unknown, {summary['refusing']} refusing, "
            f"{summary['rate_limited_now']} rate limited now"
            + ("" if fleet.store == "ok" else "; the headroom store is UNREACHABLE")
        )
        out.write("")
        rows = []
        for row in fleet.rows:
            sub = row.subscription
            limited = "yes" if row.rate_limited_now else "no"
            rows.append(
                [
                    sub.name,
                    f"{sub.provider} {sub.plan_type}",
                    *(_window(row, name, now) for name, _ in WINDOWS),
                    row.headroom.tier.value,
                    f"{limited} ({row.rate_limited_source})",
                    str(recent.get(sub.pk, 0)),
                    str(row.failures_24h),
                    ", ".join(a.name for a in sub.agents.all()) or "-",
                ]
            )
        headers = ["SUBSCRIPTION", "PLAN", *(label for _, label in WINDOWS)]
        headers += ["PRESSURE", "LIMITED NOW", "REFUSALS 2H", "24H", "AGENTS"]
        for line in table(headers, rows) if rows else ["No subscriptions."]:
            out.write(line)
        out.write("")
        agents = []
        for agent in agents_visible_to(user):
            switch, why = _switch(agent, now)
            assigned = agent.subscription.name if agent.subscription else "-"
            if agent.on_api_key_since is not None:
                since = (now - agent.on_api_key_since).total_seconds()
                assigned += f" (on the platform key for {_duration(since)})"
            agents.append(
                [agent.name, agent.owner.get_username(), assigned, agent.process_state, switch, why]
            )
        headers = ["AGENT", "OWNER", "SUBSCRIPTION", "STATE", "LAST SWITCH", "WHY"]
        for line in table(headers, agents) if agents else ["No agents."]:
            out.write(line)
