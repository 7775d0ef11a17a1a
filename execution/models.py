from __future__ import annotations

import uuid

from django.db import models

from agents.models import AuthMode


class Trigger(models.TextChoices):
    # Interactive: someone is waiting for the answer.
    PUBLIC = "public", "Public"
    CHAT = "chat", "Chat"
    API = "api", "API"
    # Autonomous: nobody is waiting.
    SCHEDULE = "schedule", "Schedule"
    AGENT = "agent", "Agent"
    MCP = "mcp", "MCP"


class Status(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class Execution(models.Model):
    """One turn of one agent, with the credential that served it and every attempt."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.SET_NULL, null=True, related_name="executions"
    )
    agent_name = models.CharField(max_length=100)
    trigger = models.CharField(max_length=20, choices=Trigger.choices, default=Trigger.API)
    message = models.TextField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    error_code = models.CharField(max_length=40, blank=True)
    error_detail = models.TextField(blank=True)
    resets_at = models.DateTimeField(null=True, blank=True)
    response = models.TextField(blank=True)
    model = models.CharField(max_length=100, blank=True)
    # Which kind of credential served the turn (the same kinds an agent boots with).
    served_by_kind = models.CharField(max_length=20, choices=AuthMode.choices, blank=True)
    served_by_subscription = models.ForeignKey(
        "subscriptions.Subscription",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="served_executions",
    )
    # One entry per attempt: {credential_kind, subscription_id, fingerprint, outcome,
    # error_code, status_code, at}. Fingerprints only, never credential values.
    attempts = models.JSONField(default=list, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["agent_name", "created_at"], name="execution_agent_created"),
            models.Index(
                fields=["served_by_subscription", "created_at"], name="execution_sub_created"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent_name} {self.status} {self.created_at:%Y-%m-%d %H:%M:%S}"
