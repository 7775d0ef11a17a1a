from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from routing.providers import ANTHROPIC, OPENAI
from routing.rung import RungKind
from trinity.crypto import EncryptedSecretField
from trinity.models import RoutingPolicy as RoutingPolicy  # its home is trinity (settings)
from trinity.node_labels import placement_problem


class Runtime(models.TextChoices):
    CLAUDE_CODE = "claude-code", "Claude Code CLI"
    ANTHROPIC_API = "anthropic-api", "Anthropic Messages API"
    CODEX_CLI = "codex-cli", "Codex CLI"


# The provider whose plans and key each runtime's turns spend (``subscriptions.models.
# Provider`` values; agents does not import subscriptions' models).
RUNTIME_PROVIDER: dict[str, str] = {
    Runtime.CLAUDE_CODE: ANTHROPIC,
    Runtime.ANTHROPIC_API: ANTHROPIC,
    Runtime.CODEX_CLI: OPENAI,
}


class WaitPolicy(models.TextChoices):
    """What an autonomous turn does when every credential refused it."""

    # Park until the earliest known reset (at most ``max_wait_seconds`` after creation).
    WAIT = "wait", "Wait for the earliest reset"
    FAIL = "fail", "Fail at once"


class Isolation(models.TextChoices):
    """How an agent's CLI is contained: what its server reports
    (agent_server/confinement.py), except ``container``, which the platform records
    for a server that reports ``separate-user`` from a container of its own (the
    Docker runtime: one agent per container, its own network, processes and
    filesystem), where the container is the boundary the sandbox gives elsewhere."""

    SANDBOX = "sandbox", "sandbox (own user, network, processes, /tmp)"
    CONTAINER = "container", "container (own user, in a container of its own)"
    SEPARATE_USER = "separate-user", "separate user (no sandbox)"
    SAME_USER = "same-user", "same user (weak)"


# What an agent server's /health may say (agent_server/contract.py ``Isolation``).
_SERVER_REPORTS = frozenset({Isolation.SANDBOX, Isolation.SEPARATE_USER, Isolation.SAME_USER})


def isolation_recorded(reported: object, *, contained: bool) -> str:
    """What the platform records of the isolation an agent server reported: its own
    word, except that an own user in a container of its own (``contained``: the
    runtime gives each agent one) is ``container``, not "no sandbox". The weak mode
    stays weak in a container too (the CLI could read its server's memory); anything
    unknown is ``""`` (``container`` too: it is the platform's word, never a server's)."""
    if reported not in _SERVER_REPORTS:
        return ""
    if reported == Isolation.SEPARATE_USER and contained:
        return Isolation.CONTAINER.value
    return str(reported)


class AuthMode(models.TextChoices):
    """Which credential an agent server was booted with: its own rung's kind, or none."""

    SUBSCRIPTION = RungKind.SUBSCRIPTION.value, "Subscription OAuth token"
    API_KEY = RungKind.API_KEY.value, "Platform API key"
    NONE = "none", "No credential"


# The Claude Code CLI's tools an agent may be allowed to run without approval
# (`--allowedTools`); anything else is refused by the agents API.
CLI_TOOLS = (
    "Bash",
    "Edit",
    "Glob",
    "Grep",
    "LS",
    "MultiEdit",
    "NotebookEdit",
    "Read",
    "Task",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
    "Write",
)


def validate_placement(value: object) -> None:
    """Raises ValidationError with ``placement_problem``'s words when ``value`` is no
    valid placement (``trinity/node_labels.py``)."""
    problem = placement_problem(value)
    if problem is not None:
        raise ValidationError(problem)


class ProcessState(models.TextChoices):
    STOPPED = "stopped", "Stopped"
    RUNNING = "running", "Running"
    FAILED = "failed", "Failed to start"


def runtime_key_for(name: str) -> str:
    """A runtime key no agent holds yet for an agent called ``name``: the name itself
    when it is free (every agent from before per-owner names kept its own), else the
    name and a random suffix. Never another agent's key, whoever owns it; the unique
    column is the judge when two creates race (the service retries)."""
    if not Agent.objects.filter(runtime_key=name).exists():
        return name
    return f"{name[:RUNTIME_KEY_STEM]}-{secrets.token_hex(5)}"


# The name's share of a suffixed key: "<stem>-<10 hex>" stays within the column's 100.
RUNTIME_KEY_STEM = 89


class Agent(models.Model):
    """An agent: one agent server (container or local process) running one runtime.

    ``name`` is its owner's word for it, unique per owner: two operators may each have
    a "bot", and neither learns of the other's. Every runtime resource (the local
    server's home, socket and work area, the container ``trinity-agent-<key>``, an OS
    user of its own) is named by ``runtime_key`` instead, which is unique across all
    owners and never changes.
    """

    name = models.SlugField(max_length=100)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="agents"
    )
    # Set at the first save (``runtime_key_for``); agents from before per-owner names
    # kept their name as their key, so running servers keep their resources.
    runtime_key = models.SlugField(max_length=100, unique=True, editable=False)
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
    # Only narrows the admin's system-wide fallback (``policy.key_verdict``): False
    # means this agent never bills the key; None follows the system (True, kept for
    # old clients, means the same as None: an agent cannot widen the fallback).
    use_platform_api_key = models.BooleanField(null=True, default=None)
    # Created from ``SystemSettings.default_routing_policy`` unless given.
    routing_policy = models.CharField(
        max_length=30, choices=RoutingPolicy.choices, default=RoutingPolicy.THRIFTY
    )
    wait_policy = models.CharField(
        max_length=10, choices=WaitPolicy.choices, default=WaitPolicy.WAIT
    )
    # An autonomous turn parks only for a reset at most this long after it was created.
    max_wait_seconds = models.PositiveIntegerField(default=6 * 3600)
    # This agent's caps on what the platform key may bill (USD); null means no cap.
    # The owner's pair (owner-writable) and the admin's pair (only an admin writes it):
    # the budget that applies is the tighter of the two (``policy.tightest_budget``),
    # so an owner may lower the admin's cap but never raise or clear it.
    key_budget_daily_usd = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True
    )
    key_budget_monthly_usd = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True
    )
    admin_key_budget_daily_usd = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True
    )
    admin_key_budget_monthly_usd = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True
    )
    # CLI tools this agent's turns may run without approval (names from CLI_TOOLS);
    # empty: the CLI's default, which in print mode denies every tool needing approval.
    allowed_tools = models.JSONField(default=list, blank=True)
    # Node label name -> value a node must carry for this agent's server to run there
    # (``trinity/node_labels.py``): the swarm runtime's placement constraints
    # ``node.labels.<name>==<value>``; the local and docker runtimes ignore it.
    placement = models.JSONField(default=dict, blank=True, validators=[validate_placement])
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
    # How its CLI is contained, as its server's /health said at the last start
    # (``isolation_recorded``): sandbox (its own OS user in its own network, PID and
    # mount namespaces), container (its own OS user in a container of its own: the
    # Docker runtime), separate-user (its own OS user only), or same-user (the weak
    # mode: the server is not root, so the CLI could read its memory); "" unknown.
    isolation = models.CharField(
        max_length=20, choices=Isolation.choices, blank=True, default="", editable=False
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
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="agent_name_per_owner")
        ]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<Agent {self.pk} {self.name!r}>"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.runtime_key:
            self.runtime_key = runtime_key_for(self.name)
        super().save(*args, **kwargs)

    def last_move(self) -> tuple[datetime | None, int | None]:
        """When the last committed switch moved this agent and the subscription it left
        (``last_switch["at"]``, ``["from"]``); None where none did or the record does
        not say."""
        record = self.last_switch if isinstance(self.last_switch, dict) else {}
        at, left = record.get("at"), record.get("from")
        try:
            moved_at = datetime.fromisoformat(at) if isinstance(at, str) else None
        except ValueError:
            moved_at = None
        return moved_at, left if isinstance(left, int) and not isinstance(left, bool) else None

    @property
    def provider(self) -> str:
        """The provider the agent's runtime speaks to: its turns walk only that
        provider's plans and key (``RUNTIME_PROVIDER``)."""
        return RUNTIME_PROVIDER[self.runtime]
