from __future__ import annotations

from django.conf import settings
from django.db import models

from agents.rung import RungKind
from trinity.crypto import EncryptedSecretField


class Runtime(models.TextChoices):
    CLAUDE_CODE = "claude-code", "Claude Code CLI"
    ANTHROPIC_API = "anthropic-api", "Anthropic Messages API"


class RoutingPolicy(models.TextChoices):
    # Plans first, the platform key only as the last rung of a walk.
    SUBSCRIPTION_FIRST = "subscription_first", "Subscriptions first"
    # Never leave the assigned subscription; refusals fail the turn.
    PINNED = "pinned", "Pinned to its subscription"


class AuthMode(models.TextChoices):
    """Which credential an agent server was booted with: its own rung's kind, or none."""

    SUBSCRIPTION = RungKind.SUBSCRIPTION.value, "Subscription OAuth token"
    API_KEY = RungKind.API_KEY.value, "Platform API key"
    NONE = "none", "No credential"


class ProcessState(models.TextChoices):
    STOPPED = "stopped", "Stopped"
    RUNNING = "running", "Running"
    FAILED = "failed", "Failed to start"


class Agent(models.Model):
    """An agent: one agent server (container or local process) running one runtime."""

    name = models.SlugField(max_length=100, unique=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="agents"
    )
    runtime = models.CharField(max_length=20, choices=Runtime.choices, default=Runtime.CLAUDE_CODE)
    model = models.CharField(max_length=100, blank=True)
    # String reference: agents must not import subscriptions (dependencies point one way).
    subscription = models.ForeignKey(
        "subscriptions.Subscription",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="agents",
    )
    use_platform_api_key = models.BooleanField(null=True, default=True)
    routing_policy = models.CharField(
        max_length=30, choices=RoutingPolicy.choices, default=RoutingPolicy.SUBSCRIPTION_FIRST
    )
    endpoint = models.CharField(max_length=200, blank=True, editable=False)
    # The running agent server: a pid (local) or container id (docker), the credential
    # mode it booted with, and whether it is up. Recorded so a restarted web process
    # finds agents that kept running.
    process_handle = models.CharField(max_length=100, blank=True, editable=False)
    process_state = models.CharField(
        max_length=10, choices=ProcessState.choices, default=ProcessState.STOPPED, editable=False
    )
    process_detail = models.CharField(max_length=500, blank=True, editable=False)
    auth_mode = models.CharField(
        max_length=20, choices=AuthMode.choices, default=AuthMode.NONE, editable=False
    )
    shared_secret = EncryptedSecretField(editable=False)
    # Set while the agent's turns are served by the platform key (the first key-served
    # turn sets it, the next plan-served turn clears it): "Back on subscription" reports
    # what the key cost meanwhile.
    on_api_key_since = models.DateTimeField(null=True, blank=True, editable=False)
    # The last committed switch: {from, to, why, at}; empty until one happens.
    last_switch = models.JSONField(default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<Agent {self.pk} {self.name!r}>"

    @property
    def provider(self) -> str:
        """Every runtime built so far speaks to Anthropic."""
        return "anthropic"
