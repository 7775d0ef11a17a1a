"""Notification channels: where notifications also go (Slack-compatible webhooks,
generic JSON POSTs), and the delivery of each notification to each channel.

``notification_send`` writes one ``NotificationDelivery`` per matching channel in the
notification's own transaction and enqueues ``trinity.deliver_notification`` once it
commits (``trinity/tasks.py`` alone reaches the broker, both ways: nothing here knows
the tasks that call it). The task makes one attempt per run (a conditional update
claims it, so a redelivered or duplicated message never posts twice at once), records
it, and retries with exponential backoff. Nothing here runs on a turn's path beyond the one
channel read and the inserts; a receiver that is down costs a turn nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import F, QuerySet

from trinity import webhooks
from trinity.crypto import Secret, fingerprint
from trinity.errors import Conflict, InvalidInput, NotFound
from trinity.models import (
    DeliveryStatus,
    Notification,
    NotificationChannel,
    NotificationDelivery,
    NotificationDeliveryAttempt,
    register_url_parts,
)

logger = logging.getLogger(__name__)

LEVEL_RANK: dict[str, int] = {
    Notification.Level.INFO.value: 0,
    Notification.Level.WARNING.value: 1,
    Notification.Level.CRITICAL.value: 2,
}

# Backoff: 30 s, 1, 2, 4, 8, 16, 32 min between the 8 attempts (about an hour in all):
# long enough to ride out a receiver's restart or a short outage.
MAX_ATTEMPTS = 8
BACKOFF_BASE_SECONDS = 30
BACKOFF_CAP_SECONDS = 3600
# While an attempt runs its row is leased this long, so the resume sweep never
# re-enqueues a delivery whose POST is still in flight (the task's hard limit is less).
ATTEMPT_LEASE = timedelta(seconds=120)
# The sweep re-enqueues a pending delivery only once it is this overdue: a queued or
# scheduled message normally runs well within it.
RESUME_GRACE = timedelta(minutes=5)

KIND_PATTERN = re.compile(r"^[a-z0-9_]{1,50}$")
MAX_URL_LENGTH = 2000
TEST_KIND = "test"


def retry_countdown(attempt: int, *, retry_after: int | None = None) -> int:
    """Seconds to wait after failed attempt number ``attempt`` (1-based): doubling from
    30 s, at most an hour; never sooner than a receiver's own Retry-After (capped)."""
    countdown = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
    if retry_after is not None:
        countdown = max(countdown, min(retry_after, BACKOFF_CAP_SECONDS))
    return countdown


def channel_matches(channel: NotificationChannel, *, kind: str, level: str) -> bool:
    """A channel takes a notification at or above its minimum level, of its kinds
    (every kind when it names none)."""
    if not channel.enabled:
        return False
    if LEVEL_RANK.get(level, 0) < LEVEL_RANK.get(channel.min_level, 0):
        return False
    return not channel.kinds or kind in channel.kinds


# --- validation ---------------------------------------------------------------------


def validate_webhook_url(url: str) -> str:
    """The stripped URL, or InvalidInput (``url``) whose message never echoes it."""
    url = url.strip()
    if len(url) > MAX_URL_LENGTH or any(c.isspace() for c in url):
        raise InvalidInput(
            f"A webhook URL is one line of at most {MAX_URL_LENGTH} characters.", field="url"
        )
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise InvalidInput(
            "A webhook URL starts with https:// (or http://) and a host.", field="url"
        )
    return url


def validate_kinds(kinds: Iterable[str]) -> list[str]:
    cleaned = sorted({k.strip() for k in kinds if k.strip()})
    for kind in cleaned:
        if not KIND_PATTERN.match(kind):
            raise InvalidInput(
                "Kinds are lower-case names like subscription_switched.", field="kinds"
            )
    return cleaned


def _url_host(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{host}:{parts.port}" if parts.port else host


# --- channels -----------------------------------------------------------------------


def notification_channels_list() -> QuerySet[NotificationChannel]:
    """Every channel, without decrypting a URL."""
    return NotificationChannel.objects.defer("url").order_by("name")


def notification_channel_get(*, pk: int) -> NotificationChannel:
    channel = NotificationChannel.objects.filter(pk=pk).first()
    if channel is None:
        raise NotFound(f"No notification channel with id {pk}.")
    return channel


def _set_url(channel: NotificationChannel, url: str) -> None:
    url = validate_webhook_url(url)
    try:
        webhooks.destination_vet(url)
    except webhooks.DestinationRefused as exc:
        raise InvalidInput(f"Refused: {exc}.", field="url") from None
    register_url_parts(url)
    channel.url = Secret(url)
    channel.url_host = _url_host(url)[:255]
    channel.url_fingerprint = fingerprint(url)


@transaction.atomic
def notification_channel_create(
    *,
    name: str,
    kind: str,
    url: str,
    now: datetime,
    min_level: str = Notification.Level.WARNING,
    kinds: Iterable[str] = (),
    enabled: bool = True,
) -> NotificationChannel:
    """Create a channel; raises InvalidInput for a bad URL or kind, Conflict for a taken name."""
    if NotificationChannel.objects.filter(name=name).exists():
        raise Conflict(f"A notification channel named {name!r} exists.")
    channel = NotificationChannel(
        name=name,
        kind=kind,
        min_level=min_level,
        kinds=validate_kinds(kinds),
        enabled=enabled,
        created_at=now,
        updated_at=now,
    )
    _set_url(channel, url)
    channel.save()
    return channel


@transaction.atomic
def notification_channel_update(
    *, channel: NotificationChannel, now: datetime, url: str | None = None, **changes: Any
) -> NotificationChannel:
    """Change a channel's name, kind, level, kinds or enabled; replace its URL when given."""
    allowed = {"name", "kind", "min_level", "kinds", "enabled"}
    unknown = set(changes) - allowed
    if unknown:
        raise InvalidInput(f"Unknown field(s): {', '.join(sorted(unknown))}.")
    if "name" in changes and (
        NotificationChannel.objects.filter(name=changes["name"]).exclude(pk=channel.pk).exists()
    ):
        raise Conflict(f"A notification channel named {changes['name']!r} exists.")
    if "kinds" in changes:
        changes["kinds"] = validate_kinds(changes["kinds"])
    for field, value in changes.items():
        setattr(channel, field, value)
    if url is not None:
        _set_url(channel, url)
    channel.updated_at = now
    channel.save()
    return channel


@transaction.atomic
def notification_channel_delete(*, channel: NotificationChannel) -> None:
    """Delete a channel and its delivery history; pending deliveries to it are dropped."""
    channel.delete()


def channel_deliveries_list(
    *, channel: NotificationChannel, limit: int = 50
) -> list[NotificationDelivery]:
    """The channel's latest deliveries, newest first, each with its attempts."""
    return list(
        NotificationDelivery.objects.filter(channel=channel)
        .select_related("notification")
        .prefetch_related("attempt_log")
        .order_by("-created_at", "-id")[:limit]
    )


# --- deliveries ---------------------------------------------------------------------


def channels_for(*, kind: str, level: str) -> list[NotificationChannel]:
    """The enabled channels a notification of ``kind`` and ``level`` goes to (one query,
    no URL decrypted)."""
    return [
        c
        for c in NotificationChannel.objects.filter(enabled=True).defer("url")
        if channel_matches(c, kind=kind, level=level)
    ]


def deliveries_create(
    *, notification: Notification | None, channels: Iterable[NotificationChannel], now: datetime
) -> list[int]:
    """One pending delivery per channel, due now; returns their ids."""
    rows = NotificationDelivery.objects.bulk_create(
        [
            NotificationDelivery(
                channel=channel, notification=notification, created_at=now, next_attempt_at=now
            )
            for channel in channels
        ]
    )
    return [row.pk for row in rows]


def payload_for(channel: NotificationChannel, notification: Notification | None) -> dict[str, Any]:
    """What a receiver gets: Slack's ``{text}``, or the notification as JSON."""
    if notification is None:
        fields: dict[str, Any] = {
            "id": None,
            "kind": TEST_KIND,
            "level": Notification.Level.INFO.value,
            "title": "Test notification from Trinity",
            "body": f"Channel {channel.name!r} works: Trinity's notifications arrive here.",
            "agent_name": "",
            "agent_owner": None,
            "subscription_id": None,
            "data": {},
            "created_at": None,
        }
    else:
        fields = {
            "id": notification.pk,
            "kind": notification.kind,
            "level": notification.level,
            "title": notification.title,
            "body": notification.body,
            "agent_name": notification.agent_name,
            # Names are unique per owner only: the receiver (the admin's) is told whose.
            "agent_owner": _agent_owner(notification),
            "subscription_id": notification.subscription_id,
            "data": notification.data,
            "created_at": notification.created_at.isoformat(),
        }
    if channel.kind == NotificationChannel.Kind.SLACK:
        return webhooks.slack_payload(
            level=fields["level"],
            title=fields["title"],
            body=fields["body"],
            agent_name=fields["agent_name"],
            agent_owner=fields["agent_owner"],
        )
    return {"source": "trinity", "channel": channel.name, "test": notification is None, **fields}


def _agent_owner(notification: Notification) -> str | None:
    """The username of the owner of the agent the notice is about (None: no agent, or
    one since deleted)."""
    agent = notification.agent if notification.agent_id is not None else None
    return agent.owner.get_username() if agent is not None else None


@dataclass(frozen=True)
class AttemptOutcome:
    """What one run of the delivery task did. ``retry_in`` is set when another attempt
    is due after that many seconds."""

    outcome: str  # delivered | retry | failed | skipped
    attempt: NotificationDeliveryAttempt | None = None
    retry_in: int | None = None


def _delivery_claim(*, delivery_id: int, now: datetime) -> NotificationDelivery | None:
    """The pending delivery, as read before this process claimed its next attempt by a
    conditional update on the attempt count; None when it is gone, finished, or
    another process claimed that attempt first."""
    delivery = (
        NotificationDelivery.objects.select_related("channel", "notification")
        .filter(pk=delivery_id, status=DeliveryStatus.PENDING)
        .first()
    )
    if delivery is None:
        return None
    claimed = NotificationDelivery.objects.filter(
        pk=delivery.pk, status=DeliveryStatus.PENDING, attempts=delivery.attempts
    ).update(attempts=F("attempts") + 1, next_attempt_at=now + ATTEMPT_LEASE)
    return delivery if claimed == 1 else None


def delivery_attempt(*, delivery_id: int, now: datetime, retry: bool = True) -> AttemptOutcome:
    """Make the next attempt of one pending delivery and record it.

    Claims the attempt by a conditional update on the attempt count, so a duplicate
    message (a redelivery, the resume sweep) that lost the race posts nothing and
    returns ``skipped``, as does a delivery already finished or deleted. Returns
    ``retry`` with the countdown when another attempt is due, ``failed`` when the
    attempts ran out (or ``retry`` is False, as for a test message) or the receiver's
    refusal is permanent. Never raises for the receiver's fault.
    """
    delivery = _delivery_claim(delivery_id=delivery_id, now=now)
    if delivery is None:
        return AttemptOutcome("skipped")
    number = delivery.attempts + 1
    channel = delivery.channel
    if not channel.enabled:
        result = webhooks.PostResult(delivered=False, error="Not sent: the channel is disabled.")
    else:
        assert channel.url is not None  # noqa: S101 - the column is NOT NULL
        result = webhooks.post(url=channel.url, payload=payload_for(channel, delivery.notification))
    final = (
        result.delivered
        or not retry
        or result.permanent
        or not channel.enabled
        or number >= MAX_ATTEMPTS
    )
    retry_in = None if final else retry_countdown(number, retry_after=result.retry_after)
    attempt = NotificationDeliveryAttempt.objects.create(
        delivery=delivery,
        number=number,
        at=now,
        status_code=result.status_code,
        error=result.error[:300],
        delivered=result.delivered,
        retry_in_seconds=retry_in,
    )
    if result.delivered:
        _finish(delivery.pk, DeliveryStatus.DELIVERED, now)
        return AttemptOutcome("delivered", attempt)
    if retry_in is None:
        _finish(delivery.pk, DeliveryStatus.FAILED, now)
        logger.warning(
            "notification delivery %s to channel %r (%s) failed after %d attempt(s): %s",
            delivery.pk,
            channel.name,
            channel.url_host,
            number,
            result.error,
        )
        return AttemptOutcome("failed", attempt)
    _retry_later(delivery, number=number, error=result.error, retry_in=retry_in, now=now)
    return AttemptOutcome("retry", attempt, retry_in)


def _retry_later(
    delivery: NotificationDelivery, *, number: int, error: str, retry_in: int, now: datetime
) -> None:
    NotificationDelivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=now + timedelta(seconds=retry_in)
    )
    logger.info(
        "notification delivery %s to channel %r: attempt %d failed (%s); next in %d s",
        delivery.pk,
        delivery.channel.name,
        number,
        error,
        retry_in,
    )


def _finish(delivery_id: int, status: str, now: datetime) -> None:
    NotificationDelivery.objects.filter(pk=delivery_id).update(
        status=status, finished_at=now, next_attempt_at=None
    )


def channel_test_send(
    *, channel: NotificationChannel, now: datetime
) -> NotificationDeliveryAttempt:
    """Send a test message to ``channel`` now, once, and return the recorded attempt.

    Runs in the caller (an admin waiting for the answer), bounded by the receiver
    timeout; a test is never retried, and is recorded like any delivery.
    """
    [delivery_id] = deliveries_create(notification=None, channels=[channel], now=now)
    outcome = delivery_attempt(delivery_id=delivery_id, now=now, retry=False)
    assert outcome.attempt is not None  # noqa: S101 - a fresh pending row is always claimed
    return outcome.attempt


def deliveries_overdue(*, now: datetime) -> list[int]:
    """The pending deliveries overdue by more than the grace (their message was lost
    with a broker or a worker), at most 1000, for the resume sweep to enqueue again. A
    duplicate is harmless: the attempt claim lets one of them post."""
    return list(
        NotificationDelivery.objects.filter(
            status=DeliveryStatus.PENDING, next_attempt_at__lte=now - RESUME_GRACE
        ).values_list("pk", flat=True)[:1000]
    )
