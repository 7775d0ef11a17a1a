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


INTERACTIVE_TRIGGERS = frozenset({Trigger.PUBLIC, Trigger.CHAT, Trigger.API})
AUTONOMOUS_TRIGGERS = (Trigger.SCHEDULE, Trigger.AGENT, Trigger.MCP)


class Status(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    # An autonomous turn every credential refused, waiting for the earliest reset.
    PARKED = "parked", "Parked"
    # Stopped by its owner or an admin (``POST /api/executions/{id}/cancel``): nothing
    # committed, no refusal recorded, no key reservation left.
    CANCELLED = "cancelled", "Cancelled"


# A turn in one of these will not run again: its event stream is complete.
FINISHED_STATUSES = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED})


class Schedule(models.Model):
    """A cron expression that fires autonomous ``schedule`` turns of one agent."""

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="schedules")
    name = models.SlugField(max_length=100)
    # Five fields, UTC (validated with croniter when saved through the service).
    cron = models.CharField(max_length=100)
    message = models.TextField()
    model = models.CharField(max_length=100, blank=True)
    enabled = models.BooleanField(default=True)
    # The next instant it fires; beat claims it by compare-and-set on this column.
    next_fire_at = models.DateTimeField(null=True, blank=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["agent_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "name"], name="schedule_agent_name"),
        ]
        indexes = [models.Index(fields=["enabled", "next_fire_at"], name="schedule_due")]

    def __str__(self) -> str:
        return f"{self.name} ({self.cron})"


class Execution(models.Model):
    """One turn of one agent, with the credential that served it and every attempt."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.SET_NULL, null=True, related_name="executions"
    )
    agent_name = models.CharField(max_length=100)
    trigger = models.CharField(max_length=20, choices=Trigger.choices, default=Trigger.API)
    message = models.TextField()
    # A chat turn continues this Claude Code session (empty for a task).
    session_id = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    error_code = models.CharField(max_length=40, blank=True)
    error_detail = models.TextField(blank=True)
    # Why a refused turn's walk stopped (``exhausted``, ``budget``, ``auto_switch_off``…).
    walk_stop = models.CharField(max_length=40, blank=True)
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
    # {from, to, why, attempts} when the turn was served by another subscription than
    # the one it started on (or by the platform key); null otherwise.
    subscription_switch = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    # The instant the turn may not outlive in ``running``: a beat task fails rows left
    # behind (``worker_lost``) so no turn hangs there forever.
    deadline = models.DateTimeField(null=True, blank=True)
    # Set when the first attempt went to an agent server: a turn whose outcome is then
    # unknown (its worker died) is failed, never re-run blind (that could bill twice).
    dispatched_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A parked turn is re-dispatched at this instant (Celery eta; beat re-sends any
    # that a lost broker message left behind).
    parked_until = models.DateTimeField(null=True, blank=True)
    schedule = models.ForeignKey(
        Schedule, on_delete=models.SET_NULL, null=True, blank=True, related_name="executions"
    )
    # What the platform key's budgets reserved for this turn: {"usd": "...", "ledgers":
    # [ids]}; released (and the real cost spent) when the turn finishes.
    key_reservation = models.JSONField(null=True, blank=True)
    # When its owner or an admin asked to cancel it (the turn ends ``cancelled`` at its
    # next step, its CLI killed by its agent server).
    cancel_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["agent_name", "created_at"], name="execution_agent_created"),
            models.Index(
                fields=["served_by_subscription", "created_at"], name="execution_sub_created"
            ),
            models.Index(fields=["status", "deadline"], name="execution_status_deadline"),
            # The concurrency cap counts an agent's queued and running turns per turn.
            models.Index(
                fields=["agent"],
                name="execution_agent_in_flight",
                condition=models.Q(status__in=["queued", "running"]),
            ),
            models.Index(fields=["status", "parked_until"], name="execution_status_parked"),
            # Session affinity reads a chat session's latest served turn on its path.
            models.Index(
                fields=["session_id", "created_at"],
                name="execution_session_created",
                condition=~models.Q(session_id=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent_name} {self.status} {self.created_at:%Y-%m-%d %H:%M:%S}"

    @property
    def autonomous(self) -> bool:
        """Nobody is waiting for the answer (a schedule, another agent, an MCP call)."""
        return self.trigger not in INTERACTIVE_TRIGGERS


class ExecutionEvent(models.Model):
    """One event of a turn as it happened (``execution/live/``): what its CLI did (text,
    tool calls and their outcomes) and what the platform did (sent, refused, walking,
    served, committed, ended), kept so a finished turn can be replayed. ``seq`` counts
    from 1 per turn with no gaps: the stream's ``id`` (``Last-Event-ID`` resumes after it).
    Redacted before it is stored; bounded per turn (``execution/live/events.py``)."""

    id = models.BigAutoField(primary_key=True)
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=20)
    data = models.JSONField(default=dict)
    at = models.DateTimeField()

    class Meta:
        ordering = ["execution_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["execution", "seq"], name="execution_event_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.execution_id} #{self.seq} {self.kind}"
