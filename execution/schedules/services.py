"""Agent schedules: a cron expression (5 fields, UTC) that fires autonomous turns.

Beat calls ``schedules_fire`` every minute. Each due schedule is claimed by a
compare-and-set on ``next_fire_at`` in the same transaction that creates its queued
``schedule`` turn, so two beats (or a beat and a retried task) never fire one twice,
and a claim whose turn could not be written is rolled back with it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from agents.models import Agent
from execution import services
from execution.models import Schedule, Trigger
from execution.schedules.cron import (
    InvalidCron,
    cron_check,
    cron_smallest_gap,
    fire_plan,
    next_fire_after,
)
from trinity.errors import Conflict, InvalidInput, QuotaExceeded

logger = logging.getLogger(__name__)

# Due schedules one sweep fires; the rest stay due and the next minute's sweep takes them.
FIRE_BATCH = 500
UPDATABLE_FIELDS = ("name", "cron", "message", "model", "enabled")


def _checked_cron(cron: str) -> str:
    """The normalised expression; InvalidInput (``cron``) when it is not 5 valid fields
    or fires more often than ``TRINITY_SCHEDULE_MIN_INTERVAL_SECONDS`` anywhere in its
    pattern (each fire is a turn billed to someone's quota)."""
    try:
        normalised = cron_check(cron)
    except InvalidCron as exc:
        raise InvalidInput(str(exc), field="cron") from None
    minimum = timedelta(seconds=settings.TRINITY_SCHEDULE_MIN_INTERVAL_SECONDS)
    gap = cron_smallest_gap(normalised)
    if gap is not None and gap < minimum:
        raise InvalidInput(
            f"{normalised!r} fires {_span(gap)} apart at its closest; a schedule may fire "
            f"at most every {_span(minimum)}.",
            field="cron",
        )
    return normalised


def _span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds()) // 60
    if minutes % 60 == 0 and minutes >= 60:
        hours = minutes // 60
        return f"{hours} hour" + ("s" if hours != 1 else "")
    return f"{minutes} minute" + ("s" if minutes != 1 else "")


def _checked_message(message: str) -> str:
    limit = settings.TRINITY_SCHEDULE_MESSAGE_MAX_CHARS
    if len(message) > limit:
        raise InvalidInput(
            f"A schedule's message is at most {limit} characters ({len(message)} given).",
            field="message",
        )
    return message


def _schedule_cap_check(agent: Agent) -> None:
    """QuotaExceeded when the agent has its ``TRINITY_MAX_SCHEDULES_PER_AGENT``.

    Counted under a lock on the agent's row, so two creates racing in different
    processes cannot both see room for one more; call inside the create's transaction.
    """
    Agent.objects.select_for_update().filter(pk=agent.pk).values_list("pk").first()
    limit = settings.TRINITY_MAX_SCHEDULES_PER_AGENT
    if Schedule.objects.filter(agent_id=agent.pk).count() >= limit:
        raise QuotaExceeded(f"Agent {agent.name!r} already has {limit} schedules, its cap.")


def _next_fire(schedule: Schedule, now: datetime) -> datetime | None:
    return next_fire_after(schedule.cron, after=now) if schedule.enabled else None


@transaction.atomic
def schedule_create(
    *,
    agent: Agent,
    name: str,
    cron: str,
    message: str,
    model: str = "",
    enabled: bool = True,
    now: datetime,
) -> Schedule:
    """Create a schedule; its first fire is the first cron instant after ``now``.

    Raises InvalidInput (field ``cron``) for an expression that is not 5 valid cron
    fields or fires more often than the minimum interval, InvalidInput (``message``)
    past the message limit, QuotaExceeded past the agent's schedule cap, Conflict when
    the agent already has a schedule of that name.
    """
    cron = _checked_cron(cron)
    message = _checked_message(message)
    _schedule_cap_check(agent)
    schedule = Schedule(
        agent=agent,
        name=name,
        cron=cron,
        message=message,
        model=model,
        enabled=enabled,
        created_at=now,
        updated_at=now,
    )
    schedule.next_fire_at = _next_fire(schedule, now)
    return _saved(schedule)


def _saved(schedule: Schedule) -> Schedule:
    """Save ``schedule``; Conflict when its agent already has one of that name."""
    try:
        with transaction.atomic():
            schedule.save()
    except IntegrityError:
        raise Conflict(
            f"Agent {schedule.agent.name!r} already has a schedule named {schedule.name!r}."
        ) from None
    return schedule


@transaction.atomic
def schedule_update(*, schedule: Schedule, changes: dict[str, Any], now: datetime) -> Schedule:
    """Apply ``changes`` (any of name, cron, message, model, enabled).

    A changed expression or a re-enabled schedule fires next at its first cron instant
    after ``now`` (a schedule switched back on does not catch up on what it missed); a
    disabled one has no next fire. Raises like ``schedule_create``.
    """
    unknown = set(changes) - set(UPDATABLE_FIELDS)
    if unknown:
        raise InvalidInput(f"Not updatable: {', '.join(sorted(unknown))}.")
    if "cron" in changes:
        changes = {**changes, "cron": _checked_cron(changes["cron"])}
    if "message" in changes:
        _checked_message(changes["message"])
    reschedule = (
        changes.get("cron", schedule.cron) != schedule.cron
        or changes.get("enabled", schedule.enabled) != schedule.enabled
    )
    for name, value in changes.items():
        setattr(schedule, name, value)
    if reschedule:
        schedule.next_fire_at = _next_fire(schedule, now)
    schedule.updated_at = now
    return _saved(schedule)


@transaction.atomic
def schedule_delete(*, schedule: Schedule) -> None:
    """Delete the schedule; turns it already fired keep running (their FK goes null)."""
    schedule.delete()


def schedules_fire(*, now: datetime) -> int:
    """Fire every enabled schedule due at ``now``; returns how many this call fired.

    Each fire is its own transaction: claim (``next_fire_at`` compare-and-set), then
    a queued autonomous turn with trigger ``schedule``, enqueued on commit. A schedule
    another process claimed first is skipped. A missed stretch fires once: the next
    fire is the first cron instant after ``now``.
    """
    due = list(
        Schedule.objects.filter(enabled=True, next_fire_at__lte=now)
        .select_related("agent")
        .order_by("next_fire_at")[:FIRE_BATCH]
    )
    fired = 0
    for schedule in due:
        if _schedule_fire(schedule=schedule, now=now):
            fired += 1
    return fired


@transaction.atomic
def _schedule_fire(*, schedule: Schedule, now: datetime) -> bool:
    """Claim one due schedule and queue its turn; False when another claimer won."""
    due_at = schedule.next_fire_at
    assert due_at is not None
    following = fire_plan(schedule.cron, due_at=due_at, now=now)
    # Under concurrent claimers the loser's UPDATE waits for the winner's row lock,
    # then re-reads next_fire_at, no longer matches, and updates nothing.
    claimed = Schedule.objects.filter(pk=schedule.pk, enabled=True, next_fire_at=due_at).update(
        next_fire_at=following, last_fired_at=now
    )
    if claimed != 1:
        return False
    # At the agent's turns cap the turn is recorded as failed, not lost (execution_enqueue).
    execution = services.execution_enqueue(
        agent=schedule.agent,
        message=schedule.message,
        trigger=Trigger.SCHEDULE,
        model=schedule.model or None,
        schedule=schedule,
    )
    logger.info(
        "schedule %s of %s fired turn %s (due %s; next %s)",
        schedule.name,
        schedule.agent.name,
        execution.pk,
        due_at.isoformat(),
        following.isoformat(),
    )
    return True
