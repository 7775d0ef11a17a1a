from __future__ import annotations

from django.core.validators import MaxValueValidator
from django.db import models

from trinity.crypto import EncryptedSecretField


def validate_alert_threshold(value: int) -> None:
    from django.core.exceptions import ValidationError

    if value != 0 and not 50 <= value <= 99:
        raise ValidationError("The alert threshold is 0 (off) or a percentage from 50 to 99.")


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
    agent_name = models.CharField(max_length=100, blank=True)
    subscription_id = models.BigIntegerField(null=True, blank=True)
    dedup_key = models.CharField(max_length=200, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    # When an operator marked it read (the panel's unread badge counts the rest).
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["dedup_key", "created_at"], name="notification_dedup"),
            models.Index(fields=["kind", "created_at"], name="notification_kind"),
        ]

    def __str__(self) -> str:
        return f"[{self.level}] {self.title}"
