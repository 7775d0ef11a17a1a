"""What the gateway keeps: a key per person, the plan each client session is on, and
one usage row per proxied request."""

from __future__ import annotations

from django.conf import settings
from django.db import models

# The providers a gateway key may reach (``routing.providers``' names).
PROVIDERS = ("anthropic", "openai-codex")


class GatewayKey(models.Model):
    """A person's key to the gateway: to a person what an agent is to a turn.

    The key itself is shown once, at creation; only its SHA-256 ``digest`` and a short
    ``prefix`` (to recognise it in a list) are kept. Empty ``providers`` /
    ``model_families`` allow every one. Each limit is off when None. ``updated_at``
    moves on every change: the gateway process polls it to see revocations and new
    limits within a second.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="gateway_keys"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=20)
    digest = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField(db_index=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    providers = models.JSONField(default=list, blank=True)
    model_families = models.JSONField(default=list, blank=True)
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    max_streams = models.PositiveIntegerField(null=True, blank=True)
    daily_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    monthly_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    daily_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    monthly_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="gateway_key_name_per_owner")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class GatewaySession(models.Model):
    """The plan a client session is on (Claude Code's session id, else the key's own
    session): kept while it serves, for the provider's prompt cache; moved by a
    compare-and-set when a walk switches it, and noticed once per switch."""

    key = models.ForeignKey(GatewayKey, on_delete=models.CASCADE, related_name="sessions")
    session_id = models.CharField(max_length=200)
    provider = models.CharField(max_length=20)
    subscription = models.ForeignKey(
        "subscriptions.Subscription", on_delete=models.SET_NULL, null=True, blank=True
    )
    on_key = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    switches = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["key", "session_id", "provider"], name="gateway_session_once"
            )
        ]

    def __str__(self) -> str:
        return f"session {self.session_id[:12]} of key {self.key_id}"


class GatewayUsage(models.Model):
    """One proxied request: who asked, what served it, what it used and cost.

    ``list_usd`` is the API list price of its tokens (what the plan saved);
    ``billed_usd`` what the platform key actually billed (0 on a plan).
    """

    key = models.ForeignKey(GatewayKey, on_delete=models.CASCADE, related_name="usage")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()
    provider = models.CharField(max_length=20)
    path = models.CharField(max_length=40)
    model = models.CharField(max_length=100, blank=True)
    status = models.PositiveSmallIntegerField()
    streamed = models.BooleanField(default=False)
    served_by_kind = models.CharField(max_length=20, blank=True)
    served_by_subscription = models.ForeignKey(
        "subscriptions.Subscription", on_delete=models.SET_NULL, null=True, blank=True
    )
    served_by_name = models.CharField(max_length=100, blank=True)
    session_id = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0)
    cache_write_tokens = models.PositiveBigIntegerField(default=0)
    list_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    billed_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    attempts = models.PositiveSmallIntegerField(default=1)
    switched = models.BooleanField(default=False)
    disconnected = models.BooleanField(default=False)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(fields=["key", "at"], name="gateway_usage_key_at"),
            models.Index(fields=["owner", "at"], name="gateway_usage_owner_at"),
        ]

    def __str__(self) -> str:
        return f"{self.path} {self.status} by key {self.key_id} at {self.at:%Y-%m-%d %H:%M}"
