from __future__ import annotations

import secrets
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from agents import lifecycle
from agents import tasks as agent_tasks
from agents.models import RUNTIME_PROVIDER, Agent, WaitPolicy, runtime_key_for
from agents.runtimes import get_runtime
from agents.signals import agent_created
from trinity.crypto import Secret
from trinity.errors import Conflict, QuotaExceeded
from trinity.selectors import system_settings_get

DEFAULT_MAX_WAIT_SECONDS = 6 * 3600  # the model's default
UPDATABLE_FIELDS = (
    "runtime",
    "model",
    "use_platform_api_key",
    "routing_policy",
    "wait_policy",
    "max_wait_seconds",
    "key_budget_daily_usd",
    "key_budget_monthly_usd",
    # Only an admin writes these (the API refuses others: ``policy.agent_fields_refused``).
    "admin_key_budget_daily_usd",
    "admin_key_budget_monthly_usd",
    "allowed_tools",
    "placement",
)
# What the agent's server is started with: a change recreates a running agent (the
# swarm runtime reschedules it under its new placement constraints).
BOOT_FIELDS = frozenset({"runtime", "model", "allowed_tools", "placement"})
# What the agent boots with depends on these: a change re-applies its credentials
# (``subscription-only`` never boots on the platform key).
CREDENTIAL_FIELDS = frozenset({"use_platform_api_key", "routing_policy"})


@transaction.atomic
def agent_create(
    *,
    owner: User,
    name: str,
    runtime: str,
    model: str = "",
    use_platform_api_key: bool | None = None,
    routing_policy: str | None = None,
    autostart: bool = True,
    auto_assign: bool = True,
    wait_policy: str = WaitPolicy.WAIT,
    max_wait_seconds: int = DEFAULT_MAX_WAIT_SECONDS,
    key_budget_daily_usd: Decimal | None = None,
    key_budget_monthly_usd: Decimal | None = None,
    admin_key_budget_daily_usd: Decimal | None = None,
    admin_key_budget_monthly_usd: Decimal | None = None,
    allowed_tools: list[str] | None = None,
    placement: dict[str, str] | None = None,
) -> Agent:
    """Create an agent owned by ``owner`` with a fresh agent-server secret.

    A budget of None means no cap on what the platform key may bill for it. With
    ``auto_assign`` a listener (subscriptions) may give it the best-ranked plan
    before it boots. Raises Conflict when the owner already has an agent of that name
    (names are per owner: another owner's namesake is no conflict, nor mentioned),
    QuotaExceeded when a non-admin owner already has ``TRINITY_MAX_AGENTS_PER_OPERATOR``
    agents. The runtime key is chosen here, once (``runtime_key_for``).
    """
    _agent_cap_check(owner)
    agent = Agent(
        owner=owner,
        name=name,
        runtime=runtime,
        model=model,
        use_platform_api_key=use_platform_api_key,
        shared_secret=Secret(secrets.token_urlsafe(32)),
        wait_policy=wait_policy,
        max_wait_seconds=max_wait_seconds,
        admin_key_budget_daily_usd=admin_key_budget_daily_usd,
        admin_key_budget_monthly_usd=admin_key_budget_monthly_usd,
        allowed_tools=list(allowed_tools or []),
        placement=dict(placement or {}),
    )
    # A budget left out stays the column's NULL: no cap.
    if key_budget_daily_usd is not None:
        agent.key_budget_daily_usd = key_budget_daily_usd
    if key_budget_monthly_usd is not None:
        agent.key_budget_monthly_usd = key_budget_monthly_usd
    # A policy not given is the system's default, fixed on the agent at creation.
    agent.routing_policy = routing_policy or system_settings_get().default_routing_policy
    _agent_insert(agent)
    agent_created.send(sender=Agent, agent=agent, auto_assign=auto_assign)
    if autostart:
        # Agents are long-running: boot its server once the row is committed.
        agent_id = agent.pk
        transaction.on_commit(lambda: agent_tasks.start.delay(agent_id))
    return agent


def _agent_insert(agent: Agent) -> None:
    """Save a new agent under a runtime key nobody holds.

    Conflict only when its owner already has an agent of that name: another owner's
    namesake is, to this owner, a free name (and the answer says nothing of it). A
    runtime key another create took meanwhile is chosen again (the unique column
    decides the race)."""
    for _ in range(3):
        agent.runtime_key = runtime_key_for(agent.name)
        try:
            with transaction.atomic():
                agent.save()
            return
        except IntegrityError:
            if Agent.objects.filter(owner_id=agent.owner_id, name=agent.name).exists():
                raise Conflict(
                    f"You already have an agent named {agent.name!r}.", field="name"
                ) from None
    raise Conflict(f"Could not name {agent.name!r}'s resources; try again.", field="name")


def _agent_cap_check(owner: User) -> None:
    """QuotaExceeded when ``owner`` (not an admin: admins run the fleet) is at the cap.

    Counted under a lock on the owner's user row, inside the create's transaction, so
    creates racing in different processes see each other's rows.
    """
    if owner.is_staff:
        return
    User.objects.select_for_update().filter(pk=owner.pk).values_list("pk").first()
    limit = settings.TRINITY_MAX_AGENTS_PER_OPERATOR
    if Agent.objects.filter(owner_id=owner.pk).count() >= limit:
        raise QuotaExceeded(
            f"You already have {limit} agents, the cap for an operator; delete one or "
            "ask an admin to raise TRINITY_MAX_AGENTS_PER_OPERATOR."
        )


@transaction.atomic
def agent_update(*, agent: Agent, changes: dict[str, Any]) -> Agent:
    """Apply ``changes`` (only ``UPDATABLE_FIELDS``; others are ignored) and save them.

    A change to what it boots with (``BOOT_FIELDS``: runtime, model, allowed tools,
    placement) restarts the agent once committed; a credential change (its platform-key
    switch or its routing policy) re-applies its credentials.
    """
    fields = [f for f in UPDATABLE_FIELDS if f in changes]
    if "runtime" in fields:
        _provider_change_check(agent, changes["runtime"])
    for field in fields:
        setattr(agent, field, changes[field])
    if fields:
        agent.save(update_fields=[*fields, "updated_at"])
    if (BOOT_FIELDS | CREDENTIAL_FIELDS) & set(fields):
        agent_id = agent.pk
        if BOOT_FIELDS & set(fields):
            transaction.on_commit(lambda: agent_tasks.restart.delay(agent_id))
        else:
            transaction.on_commit(lambda: agent_tasks.apply_credentials.delay(agent_id))
    return agent


def _provider_change_check(agent: Agent, runtime: str) -> None:
    """Conflict when a runtime change would leave the agent assigned to another
    provider's plan: a Claude agent's plan cannot serve Codex turns, nor the reverse."""
    if RUNTIME_PROVIDER[runtime] != agent.provider and agent.subscription_id is not None:
        raise Conflict(
            f"Agent {agent.name!r} is assigned to a {agent.provider} subscription; a "
            f"{runtime} agent spends {RUNTIME_PROVIDER[runtime]} plans. Unassign it first.",
            field="runtime",
        )


def agent_delete(*, agent: Agent) -> None:
    """Delete the agent and everything it left, the plan token file first.

    Order: the token file (so no later failure can leave the secret on disk), the
    server (stopped through the lifecycle), whatever else the runtime kept (local:
    the home folder with .env and log; docker: its containers and volumes), then the
    row. A failure raises with the row still there, so the delete can be retried.
    """
    runtime = get_runtime()
    runtime.forget_credentials(name=agent.runtime_key)
    lifecycle.agent_stop(agent=agent)
    runtime.discard(name=agent.runtime_key)
    agent.delete()
