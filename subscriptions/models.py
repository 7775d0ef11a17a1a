from __future__ import annotations

from django.db import models

from routing import providers
from trinity.crypto import EncryptedSecretField


class Provider(models.TextChoices):
    # Values and labels are the routing core's (the panel's tables read them there).
    ANTHROPIC = providers.ANTHROPIC, providers.PROVIDER_LABELS[providers.ANTHROPIC]
    OPENAI_CODEX = providers.OPENAI, providers.PROVIDER_LABELS[providers.OPENAI]


class Subscription(models.Model):
    """A plan subscription whose quota turns spend. The token is write-only."""

    name = models.CharField(max_length=100, unique=True)
    provider = models.CharField(max_length=20, choices=Provider.choices)
    plan_type = models.CharField(max_length=30)
    token = EncryptedSecretField(editable=False)
    token_fingerprint = models.CharField(max_length=4, editable=False)
    # A Claude plan signed in from the panel (``subscriptions/plan_sign_in/``): the
    # refresh token its sign-in rotates, and when ``token`` (its access token)
    # expires. Both empty for a pasted token, which is never refreshed; a Codex plan
    # keeps its whole sign-in in ``token`` (``subscriptions/codex_credential.py``).
    refresh_token = EncryptedSecretField(null=True, blank=True, editable=False)
    token_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    billing_class = models.CharField(max_length=20, default="plan", editable=False)
    overage = models.CharField(max_length=20, default="refuse", editable=False)
    max_concurrency = models.PositiveIntegerField(null=True, blank=True)
    # Paused by an admin (when, and who): no turn, walk or placement uses the plan
    # until it is resumed (``routing.eligibility``: ``Reason.PAUSED``). NULL: in service.
    paused_at = models.DateTimeField(null=True, blank=True, editable=False)
    paused_by = models.CharField(max_length=150, blank=True, default="", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<Subscription {self.pk} {self.name!r} …{self.token_fingerprint}>"


class FailureKind(models.TextChoices):
    RATE_LIMIT = "rate_limit", "Rate limit"
    AUTH = "auth", "Credential refused"


class CredentialKind(models.TextChoices):
    """Which kind of credential a refused attempt was sent with (a rung's kind)."""

    SUBSCRIPTION = "subscription", "Subscription"
    API_KEY = "api_key", "Platform API key"


class RateLimitEvent(models.Model):
    """A refusal recorded against the credential that was actually sent.

    A subscription's refusal names it; a platform-key refusal has no subscription.
    ``resets_at`` is the instant the refusal said the quota returns, when it said one.
    ``failure_kind`` is NULL on rows written before kinds existed; those count as
    failures for candidate skipping but not as rate limits for display.
    """

    # The agent whose turn was refused. SET_NULL: the refusal is evidence about the
    # credential (the walk's skip list, the pool's state), which must outlive the
    # agent; a row without its agent is an admin's history only, so a new agent
    # that reuses the name inherits none of it. ``agent_name`` stays as the label.
    agent = models.ForeignKey(
        "agents.Agent",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="rate_limit_events",
    )
    agent_name = models.CharField(max_length=100)
    credential_kind = models.CharField(
        max_length=20, choices=CredentialKind.choices, default=CredentialKind.SUBSCRIPTION
    )
    subscription = models.ForeignKey(
        Subscription,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="rate_limit_events",
    )
    error_message = models.TextField(blank=True)
    # NULL is meaningful (legacy rows of unknown kind), unlike an empty string.
    failure_kind = models.CharField(  # noqa: DJ001
        max_length=20, choices=FailureKind.choices, null=True, blank=True
    )
    limiting_window = models.CharField(max_length=40, blank=True)
    resets_at = models.DateTimeField(null=True, blank=True)
    occurred_at = models.DateTimeField()
    # The fingerprint (last 4) of the platform key a key refusal was made with: the
    # refusal closes that key's rung only, so a replaced key starts clean. Empty on a
    # plan's refusal and on key refusals recorded before it was kept.
    credential_fingerprint = models.CharField(max_length=4, blank=True, default="")

    class Meta:
        ordering = ["-occurred_at"]
        indexes = [
            models.Index(fields=["subscription", "occurred_at"], name="rle_sub_occurred"),
            models.Index(
                fields=["agent_name", "subscription", "occurred_at"], name="rle_agent_sub_occurred"
            ),
            models.Index(fields=["credential_kind", "occurred_at"], name="rle_kind_occurred"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(credential_kind="subscription", subscription__isnull=False)
                    | models.Q(credential_kind="api_key", subscription__isnull=True)
                ),
                name="rle_credential_names_its_subscription",
            )
        ]

    def __str__(self) -> str:
        kind = self.failure_kind or "failure"
        whose = self.subscription_id if self.subscription_id is not None else "platform key"
        return f"{kind} on {whose} at {self.occurred_at:%Y-%m-%d %H:%M:%S}"


class HeadroomSample(models.Model):
    """One headroom reading kept for charts; the live reading is the cached snapshot.

    Pruned after TRINITY_HEADROOM_HISTORY_DAYS (30 by default).
    """

    subscription = models.ForeignKey(
        Subscription, on_delete=models.CASCADE, related_name="headroom_samples"
    )
    fetched_at = models.DateTimeField()
    status = models.CharField(max_length=20)
    source = models.CharField(max_length=20, blank=True)
    detail = models.CharField(max_length=200, blank=True)
    # The two figures charts draw, as columns; every window (family ones too) in JSON.
    five_hour = models.FloatField(null=True, blank=True)
    seven_day = models.FloatField(null=True, blank=True)
    windows = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["fetched_at"]
        indexes = [
            models.Index(fields=["subscription", "fetched_at"], name="headroom_sub_fetched"),
            models.Index(fields=["fetched_at"], name="headroom_fetched"),
        ]

    def __str__(self) -> str:
        return f"{self.status} on {self.subscription_id} at {self.fetched_at:%Y-%m-%d %H:%M:%S}"


class BudgetPeriod(models.TextChoices):
    DAY = "day", "Day"
    MONTH = "month", "Month"


FLEET_SCOPE = "fleet"


class KeySpend(models.Model):
    """The spend ledger of the platform key: one row per scope and budget period.

    ``scope`` is ``fleet`` or ``agent:<id>``; ``starts_on`` the period's first day (UTC).
    ``reserved_usd`` holds what turns now running on the key were admitted with; a
    finished key-served turn moves its reservation to ``spent_usd`` at its real cost.
    Admission is one conditional update (``spent + reserved < budget``), so concurrent
    turns cannot both pass a read-then-check.
    """

    scope = models.CharField(max_length=60)
    period = models.CharField(max_length=10, choices=BudgetPeriod.choices)
    starts_on = models.DateField()
    spent_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    reserved_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "period", "starts_on"], name="key_spend_scope_period"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.period} {self.starts_on}: ${self.spent_usd}"
