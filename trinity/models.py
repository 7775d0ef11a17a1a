from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models

from trinity.crypto import EncryptedSecretField, Secret
from trinity_contract.redaction import register_secret


def validate_alert_threshold(value: int) -> None:
    from django.core.exceptions import ValidationError

    if value != 0 and not 50 <= value <= 99:
        raise ValidationError("The alert threshold is 0 (off) or a percentage from 50 to 99.")


class RoutingPolicy(models.TextChoices):
    """How an agent's turns may be paid for (``agents.Agent.routing_policy``): the
    names and labels only. What each allows is decided in one place, the verdicts of
    ``routing/policy.py`` (which spells these values, since it imports no
    models; a test pins that they agree)."""

    THRIFTY = "thrifty", "Thrifty: plans first, the API key last"
    SUBSCRIPTION_ONLY = "subscription-only", "Subscriptions only: never the API key"
    PINNED = "pinned", "Pinned to its subscription"


class RoutingStrategy(models.TextChoices):
    """How a walk ranks the subscriptions it may try next."""

    # By 10-point band of the fullest deciding window, then by agent count.
    BANDED = "banded", "Banded headroom"
    # By remaining quota per unit of time left in each window (reset-aware), with
    # hysteresis so a plan in use is not dropped or displaced on noise. The default:
    # on every fleet-benchmark trace it spent less on the key with fewer ping-pongs.
    BALANCED = "balanced", "Balanced, reset-aware"


class SystemSettings(models.Model):
    """The platform's switches: one row, created on first read."""

    SINGLETON_ID = 1

    auto_switch_subscriptions = models.BooleanField(default=True)
    subscription_api_key_fallback = models.BooleanField(default=True)
    subscription_headroom_auto_refresh = models.BooleanField(default=True)
    headroom_alert_threshold = models.PositiveSmallIntegerField(
        default=75, validators=[MaxValueValidator(99), validate_alert_threshold]
    )
    platform_api_key = EncryptedSecretField(null=True, blank=True, editable=False)
    platform_api_key_fingerprint = models.CharField(max_length=4, blank=True, editable=False)
    # The OpenAI key: the last rung of Codex agents only (``routing.providers``).
    openai_platform_api_key = EncryptedSecretField(null=True, blank=True, editable=False)
    openai_platform_api_key_fingerprint = models.CharField(max_length=4, blank=True, editable=False)
    # The policy a new agent gets when it is created without one.
    default_routing_policy = models.CharField(
        max_length=30, choices=RoutingPolicy.choices, default=RoutingPolicy.THRIFTY
    )
    routing_strategy = models.CharField(
        max_length=20, choices=RoutingStrategy.choices, default=RoutingStrategy.BALANCED
    )
    # Fleet-wide caps on what the Anthropic platform key may bill (USD); null means no cap.
    key_budget_daily_usd = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True
    )
    key_budget_monthly_usd = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True
    )
    # The same caps on the OpenAI key: its spend never counts against the Anthropic
    # key's budgets, nor the reverse.
    openai_key_budget_daily_usd = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True
    )
    openai_key_budget_monthly_usd = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "system settings"
        verbose_name_plural = "system settings"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(headroom_alert_threshold=0)
                | models.Q(headroom_alert_threshold__gte=50, headroom_alert_threshold__lte=99),
                name="system_settings_alert_threshold_range",
            ),
            models.CheckConstraint(condition=models.Q(id=1), name="system_settings_singleton"),
        ]

    def __str__(self) -> str:
        return "System settings"

    @property
    def platform_api_key_configured(self) -> bool:
        return bool(self.platform_api_key)


class Notification(models.Model):
    """Something the operator is told: a switch, an exhausted walk, a headroom alert."""

    class Level(models.TextChoices):
        INFO = "info"
        WARNING = "warning"
        CRITICAL = "critical"

    kind = models.CharField(max_length=50)
    level = models.CharField(max_length=10, choices=Level.choices, default=Level.INFO)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    # The agent it is about (visibility follows its owner). SET_NULL, not CASCADE: the
    # admin's history and its webhook deliveries outlive the agent; a row whose agent
    # is gone (``agent_name`` set, ``agent`` null) is shown to admins only, so a new
    # agent that reuses the name starts clean. ``agent_name`` stays as the label.
    agent = models.ForeignKey(
        "agents.Agent",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="notifications",
    )
    agent_name = models.CharField(max_length=100, blank=True)
    subscription_id = models.BigIntegerField(null=True, blank=True)
    dedup_key = models.CharField(max_length=200, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    # Who has read it is per user (``NotificationRead``): a notice several users see
    # (a shared plan's alert; every notice, for the admins) stays unread for each of
    # them until they mark it.

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["dedup_key", "created_at"], name="notification_dedup"),
            models.Index(fields=["kind", "created_at"], name="notification_kind"),
        ]

    def __str__(self) -> str:
        return f"[{self.level}] {self.title}"


class NotificationRead(models.Model):
    """One user has read one notification (the panel's unread badge counts the rest).

    Per user, not a column of the notification: marking read is one person's act,
    and an operator clearing the shared notices they see must not clear them for the
    admins. Deleted with either side.
    """

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="reads")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_reads"
    )
    read_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "notification"], name="notification_read_once")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} read {self.notification_id}"


class WebhookUrlField(EncryptedSecretField):
    """An encrypted webhook URL. Loading one also registers its path and query with
    the redactor: for a Slack-style hook the path *is* the credential, and an HTTP
    library's log line may carry the path without the scheme and host."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Secret | None:
        secret = super().from_db_value(value, expression, connection)
        if secret is not None:
            register_url_parts(secret.reveal())
        return secret

    def to_python(self, value: Any) -> Secret | None:
        secret = super().to_python(value)
        if secret is not None:
            register_url_parts(secret.reveal())
        return secret


def register_url_parts(url: str) -> None:
    """Mask a URL's path and query wherever they appear (the full URL already is)."""
    parts = urlsplit(url)
    for piece in (parts.path, parts.query, f"{parts.path}?{parts.query}"):
        if piece.strip("/?"):
            register_secret(piece)


class NotificationChannel(models.Model):
    """Where notifications are also sent: a Slack-compatible incoming webhook or a
    generic JSON POST. The URL is write-only: only its host and last 4 are shown."""

    class Kind(models.TextChoices):
        SLACK = "slack", "Slack-compatible incoming webhook"
        JSON = "json", "Generic JSON POST"

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    url = WebhookUrlField(editable=False)
    url_host = models.CharField(max_length=255, editable=False)
    url_fingerprint = models.CharField(max_length=4, blank=True, editable=False)
    # The least severe level sent; notifications below it stay in the panel only.
    min_level = models.CharField(
        max_length=10, choices=Notification.Level.choices, default=Notification.Level.WARNING
    )
    # Notification kinds sent; empty means every kind.
    kinds = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return (
            f"<NotificationChannel {self.pk} {self.name!r} {self.url_host} …{self.url_fingerprint}>"
        )


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"


class NotificationDelivery(models.Model):
    """One notification (or a test message) on its way to one channel.

    Written in the same transaction as the notification, so a receiver that is down,
    a lost broker message or a dead worker loses nothing: the row stays ``pending``
    until an attempt succeeds or the attempts run out.
    """

    channel = models.ForeignKey(
        NotificationChannel, on_delete=models.CASCADE, related_name="deliveries"
    )
    # NULL for a "send test" message.
    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, null=True, blank=True, related_name="deliveries"
    )
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    # When the next attempt is due (or, while one runs, when its lease ends).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "notification deliveries"
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="delivery_status_due"),
            models.Index(fields=["channel", "created_at"], name="delivery_channel_created"),
        ]

    def __str__(self) -> str:
        return f"{self.status} to {self.channel_id} after {self.attempts} attempt(s)"


class NotificationDeliveryAttempt(models.Model):
    """One POST to a receiver: what it answered (or why it could not), and when."""

    delivery = models.ForeignKey(
        NotificationDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    number = models.PositiveSmallIntegerField()
    at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    # Redacted and never the URL: an exception class and its message, or the
    # receiver's answer, cut short.
    error = models.CharField(max_length=300, blank=True)
    delivered = models.BooleanField(default=False)
    # The backoff chosen after this attempt failed; NULL when it was the last one.
    retry_in_seconds = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="delivery_attempt_once")
        ]

    def __str__(self) -> str:
        outcome = "delivered" if self.delivered else (self.error or self.status_code)
        return f"attempt {self.number} of {self.delivery_id}: {outcome}"
