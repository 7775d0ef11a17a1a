"""Agent lifecycle: start, stop, health, hot-reload and recreate.

The credential an agent boots with (its baseline) follows its assignment: the
subscription's OAuth token, else the platform API key where the agent may use it,
else nothing. A change between a subscription and a subscription is a hot-reload
(the next spawn uses the new token); a change of mode recreates the agent, because
the boot guard and the baseline environment depend on the mode.
"""

from __future__ import annotations

import logging
import time
from functools import partial

from django.conf import settings
from django.db import transaction

from agents.client import AgentServerClient, AgentServerUnavailable, ReloadRefused
from agents.models import Agent, AuthMode, Isolation, ProcessState, Runtime, isolation_recorded
from agents.runtimes import SpawnSpec, get_runtime
from agents.runtimes.base import Spawned, StartConflict
from routing.policy import agent_key_verdict
from routing.providers import key_label, platform_key
from routing.rung import Rung, RungKind
from trinity.celery import app as celery_app
from trinity.crypto import Secret
from trinity.markers import marker_claim, marker_release
from trinity.selectors import system_settings_get
from trinity_contract.redaction import redact

logger = logging.getLogger(__name__)
# The task that applies an agent's credentials, by name: the task module imports this
# one, so this one never imports it (``agents.apps`` registers it at start).
APPLY_CREDENTIALS = "agents.apply_credentials"

START_MARKER_TTL = 120
# How long a turn waits for a start another process is running (a local agent server
# answers /health within ~30 s; docker may pull an image), and how often it looks.
START_WAIT_SECONDS = 60.0
START_POLL_SECONDS = 0.2


class AgentStartFailed(Exception):
    """The agent's server could not be started; the message is redacted."""


def baseline_rung(agent: Agent) -> Rung | None:
    """The rung an agent runs on when no walk intervenes (what it boots with).

    The assigned subscription (of the agent's provider; a Codex plan's rung boots
    nothing, ``Rung.boots``, and every turn carries its tokens), else the platform key
    of the agent's provider (``Agent.provider``: never another provider's) where the
    key verdict allows it (the system's fallback on, that key configured, the agent's
    policy and flag not forbidding it), else None. The verdict is the routing
    policy's (``routing.policy``: the only module of subscriptions agents
    imports, pure, no models, no I/O), so the boot credential and the walk agree.
    """
    subscription = agent.subscription
    if subscription is not None and subscription.provider == agent.provider and subscription.token:
        return Rung(
            RungKind.SUBSCRIPTION,
            subscription.token,
            subscription.pk,
            subscription.name,
            subscription.provider,
            expires_at=subscription.token_expires_at,
        )
    system = system_settings_get()
    provider = agent.provider
    key, _ = platform_key(system, provider)
    if key is not None and agent_key_verdict(agent, system).allowed:
        return Rung(RungKind.API_KEY, key, name=key_label(provider), provider=provider)
    return None


def agents_key_mode_reapply() -> list[int]:
    """After the key's system-wide switch or the key itself changed: bring every
    running agent that does not boot on a plan in line with the verdict (one booted
    on the key must stop holding it; one booted on nothing may now boot on it).
    Enqueued after commit; returns the agents' ids."""
    ids = list(
        Agent.objects.filter(process_state=ProcessState.RUNNING)
        .exclude(auth_mode=AuthMode.SUBSCRIPTION)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    for agent_id in ids:
        transaction.on_commit(partial(celery_app.tasks[APPLY_CREDENTIALS].delay, agent_id))
    return ids


def auth_mode(rung: Rung | None) -> str:
    """The mode an agent boots in for ``rung`` (none for one it never boots with)."""
    return rung.kind.value if rung is not None and rung.boots else AuthMode.NONE


def spawn_spec(agent: Agent) -> tuple[str, SpawnSpec]:
    rung = baseline_rung(agent)
    spec = SpawnSpec(
        # The runtime key, not the name: names are per owner, resources are global.
        name=agent.runtime_key,
        runtime=agent.runtime,
        model=agent.model,
        secret=agent.shared_secret,
        # LOG_FORMAT and the name: the server's JSON lines match the platform's.
        env={
            "ANTHROPIC_BASE_URL": settings.TRINITY_ANTHROPIC_BASE_URL,
            # Where a Codex agent's forwarder spends a plan's token and an OpenAI key.
            "TRINITY_CODEX_BASE_URL": settings.TRINITY_CODEX_BASE_URL,
            "TRINITY_OPENAI_BASE_URL": settings.TRINITY_OPENAI_BASE_URL,
            "LOG_FORMAT": settings.LOG_FORMAT,
            "TRINITY_AGENT_NAME": agent.name,
            # The CLI's --allowedTools; TRINITY_* names are the one layer an agent's
            # own .env cannot override.
            "TRINITY_AGENT_ALLOWED_TOOLS": ",".join(agent.allowed_tools),
        },
        credentials=_boot_credentials(rung),
        placement=dict(agent.placement),
    )
    return auth_mode(rung), spec


def _boot_credentials(rung: Rung | None) -> dict[str, Secret]:
    """The environment entry the agent boots with for ``rung`` ({} for none). The
    routing core types a rung's secret by protocol; the spawn takes trinity's
    ``Secret`` (the same value, still never printed)."""
    if rung is None:
        return {}
    return {name: Secret(secret.reveal()) for name, secret in rung.env().items()}


def client_for(agent: Agent) -> AgentServerClient:
    """The client of the agent's recorded server. Its first request in this process
    proves the endpoint first (a restarted web or worker finds agents that kept
    running, and trusts none of them until they prove the agent's secret)."""
    return AgentServerClient(
        endpoint=agent.endpoint, secret=agent.shared_secret, handle=agent.process_handle
    )


def _reload(agent: Agent) -> Agent:
    return Agent.objects.select_related("subscription").get(pk=agent.pk)


def agent_start(*, agent: Agent) -> Agent:
    """Start the agent's server unless it already runs. Returns the refreshed agent.

    Single-flight across processes through a cache marker (fails open when the cache
    is down: a rare double start is recoverable, a blocked start is not).
    """
    agent = _reload(agent)
    runtime = get_runtime()
    if agent.process_state == ProcessState.RUNNING and runtime.is_alive(
        name=agent.runtime_key, handle=agent.process_handle
    ):
        return agent
    marker = f"agent-start:{agent.pk}"
    # Fails open: None (cache down) proceeds, and the compare-and-set below still
    # keeps a rare double start to one recorded server.
    if marker_claim(marker, ttl=START_MARKER_TTL) is False:
        logger.info("agent %s is being started elsewhere; waiting for it", agent.name)
        return _await_start(agent)
    try:
        mode, spec = spawn_spec(agent)
        if mode != AuthMode.SUBSCRIPTION:
            # A token file left by an earlier hot-reload would outlive the plan it
            # belonged to on an agent that now boots on the key (or on nothing).
            runtime.forget_credentials(name=agent.runtime_key)
        try:
            spawned = runtime.start(spec)
        except StartConflict:
            # Another start holds the server's name: it is not a failure of this agent,
            # so its row keeps whatever the winner records; wait for that instead.
            logger.info("agent %s: a concurrent start holds its server; waiting", agent.name)
            return _await_start(agent)
        except Exception as exc:
            # Whatever the runtime raised (a process that exited, a docker API error,
            # or a bug, whose traceback is logged), the agent did not start: say so on
            # its row and to the caller in one type.
            detail = redact(str(exc))[:500]
            Agent.objects.filter(pk=agent.pk).update(
                process_state=ProcessState.FAILED, process_detail=detail
            )
            logger.exception("agent %s failed to start: %s", agent.name, detail)
            raise AgentStartFailed(detail) from exc
        # Compare-and-set on the handle we saw: if another process recorded its own
        # spawn meanwhile (the marker failed open), keep theirs and stop ours.
        recorded = Agent.objects.filter(pk=agent.pk, process_handle=agent.process_handle).update(
            endpoint=spawned.endpoint,
            process_handle=spawned.handle,
            process_state=ProcessState.RUNNING,
            process_detail="",
            auth_mode=mode,
        )
        if recorded != 1:
            logger.warning(
                "agent %s was started concurrently; stopping the extra server", agent.name
            )
            runtime.stop(name=agent.runtime_key, handle=spawned.handle)
        else:
            _isolation_record(agent=agent, spawned=spawned, contained=runtime.contained)
    finally:
        marker_release(marker)
    return _reload(agent)


def _isolation_record(*, agent: Agent, spawned: Spawned, contained: bool) -> None:
    """Keep how the new server's CLI is contained (its /health says, read by
    ``isolation_recorded``: in a container of its own, ``contained``, an own user is
    ``container``); never raises.

    Anything short of a sandbox or a container is kept as such, so the API and the
    panel warn about it, and what the host lacks for it is logged.
    """
    try:
        health = AgentServerClient(
            endpoint=spawned.endpoint, secret=agent.shared_secret, handle=spawned.handle
        ).health()
    except AgentServerUnavailable as exc:
        logger.warning("agent %s: isolation unknown (%s)", agent.name, exc)
        return
    value = isolation_recorded(health.get("isolation"), contained=contained)
    Agent.objects.filter(pk=agent.pk, process_handle=spawned.handle).update(isolation=value)
    missing = health.get("isolation_missing")
    lacking = "; ".join(str(m) for m in missing) if isinstance(missing, list) else ""
    if value == Isolation.SAME_USER:
        logger.warning(
            "agent %s runs in the weak mode: its CLI runs as the platform's own OS user "
            "(missing: %s)",
            agent.name,
            lacking or "unknown",
        )
    elif value == Isolation.SEPARATE_USER:
        logger.warning(
            "agent %s runs without a sandbox: its CLI has a user of its own but shares "
            "the host's network and processes (missing: %s)",
            agent.name,
            lacking or "unknown",
        )
    elif value == Isolation.CONTAINER:
        logger.info(
            "agent %s runs its CLI as a user of its own in its container (no sandbox "
            "inside it: %s)",
            agent.name,
            lacking or "none needed",
        )
    elif lacking:
        logger.warning("agent %s: its sandbox lacks %s", agent.name, lacking)


def _await_start(agent: Agent) -> Agent:
    """Wait (bounded) for the start another process is running to record its server.

    Returns the agent as it then reads: running with an endpoint, or whatever state the
    other start left (a turn then fails ``container_fault`` with that state's detail).
    """
    deadline = time.monotonic() + START_WAIT_SECONDS
    while time.monotonic() < deadline:
        current = _reload(agent)
        if current.process_state == ProcessState.FAILED or (
            current.process_state == ProcessState.RUNNING and current.endpoint
        ):
            return current
        time.sleep(START_POLL_SECONDS)
    return _reload(agent)


def agent_revive(*, agent: Agent) -> Agent | None:
    """The agent's recorded server took no connection: when the runtime says it is
    gone (crashed, killed, its container removed), start it again on the credentials
    the agent should have now. Returns the agent on its new server, or None when the
    old one still runs (unreachable for another reason) or no new one came up."""
    if get_runtime().is_alive(name=agent.runtime_key, handle=agent.process_handle):
        return None
    logger.warning("agent %s: its server is gone; starting it again", agent.name)
    try:
        revived = agent_start(agent=agent)
    except AgentStartFailed:
        return None
    if not revived.endpoint or revived.process_handle == agent.process_handle:
        return None
    return revived


def agent_stop(*, agent: Agent) -> Agent:
    agent = _reload(agent)
    if agent.process_handle:
        get_runtime().stop(name=agent.runtime_key, handle=agent.process_handle)
    Agent.objects.filter(pk=agent.pk).update(
        endpoint="", process_handle="", process_state=ProcessState.STOPPED, process_detail=""
    )
    return _reload(agent)


def agent_recreate(*, agent: Agent) -> Agent:
    """Stop and start with the credentials the agent should have now."""
    agent_stop(agent=agent)
    return agent_start(agent=agent)


def agent_health(*, agent: Agent) -> dict[str, object]:
    """Whether the process is alive and what its /health says; never raises."""
    alive = bool(agent.process_handle) and get_runtime().is_alive(
        name=agent.runtime_key, handle=agent.process_handle
    )
    health: dict[str, object] = {"state": agent.process_state, "alive": alive}
    if alive:
        try:
            health["server"] = client_for(agent).health()
        except AgentServerUnavailable as exc:
            health["error"] = str(exc)
    elif agent.process_state == ProcessState.RUNNING:
        health["error"] = "the agent server is not running"
    return health


def hot_reload_subscription_token(*, agent: Agent) -> str:
    """Hand the agent its subscription's current token for the next spawns.

    Claude runtimes also force-unset API keys so a stale .env key cannot shadow the
    plan. Returns "reloaded", or "restarted" when the server has no reload endpoint
    (404), cannot be reached, or there is no token to send.
    """
    agent = _reload(agent)
    token = agent.subscription.token if agent.subscription is not None else None
    if not token:
        agent_recreate(agent=agent)
        return "restarted"
    try:
        shadow = client_for(agent).reload_token(
            token=token, remove_api_key=agent.runtime == Runtime.CLAUDE_CODE
        )
    except AgentServerUnavailable as exc:
        logger.warning("agent %s: reload-token unreachable (%s); restarting", agent.name, exc)
        agent_recreate(agent=agent)
        return "restarted"
    except ReloadRefused as exc:
        if exc.status_code != 404:
            raise
        logger.warning("agent %s has no reload-token endpoint; restarting", agent.name)
        agent_recreate(agent=agent)
        return "restarted"
    if shadow:
        logger.warning(
            "agent %s: its .env still carries %s (force-unset for every spawn)",
            agent.name,
            ", ".join(shadow),
        )
    logger.info("agent %s: subscription token hot-reloaded", agent.name)
    return "reloaded"


def agent_apply_credentials(*, agent: Agent) -> str:
    """Bring a running agent in line with its assignment; idempotent.

    Returns "not_running", "recreated", "reloaded", "restarted" or "unchanged".
    """
    agent = _reload(agent)
    runtime = get_runtime()
    if agent.process_state != ProcessState.RUNNING or not runtime.is_alive(
        name=agent.runtime_key, handle=agent.process_handle
    ):
        return "not_running"  # the next start boots with the current credentials
    mode = auth_mode(baseline_rung(agent))
    if mode != agent.auth_mode:
        # Claim the change by compare-and-set on the mode and server we saw: of two
        # tasks racing for one agent only one recreates (a second recreate would kill
        # the turns that started on the first one's server).
        claimed = Agent.objects.filter(
            pk=agent.pk, auth_mode=agent.auth_mode, process_handle=agent.process_handle
        ).update(auth_mode=mode)
        if claimed != 1:
            logger.info("agent %s: its credentials are being applied elsewhere", agent.name)
            return "unchanged"
        logger.info("agent %s: auth mode %s -> %s; recreating", agent.name, agent.auth_mode, mode)
        agent_recreate(agent=agent)
        return "recreated"
    if mode == AuthMode.SUBSCRIPTION:
        return hot_reload_subscription_token(agent=agent)
    return "unchanged"


def agents_supervise() -> list[str]:
    """Restart every agent recorded as running whose server is gone; returns their names.

    Agents the operator stopped, and agents that failed to start, are left alone.
    """
    runtime = get_runtime()
    revived: list[str] = []
    for agent in Agent.objects.filter(process_state=ProcessState.RUNNING):
        if runtime.is_alive(name=agent.runtime_key, handle=agent.process_handle):
            continue
        logger.warning("agent %s is recorded as running but its server is gone", agent.name)
        try:
            agent_start(agent=agent)
            revived.append(agent.name)
        except Exception:
            logger.exception("agent %s did not restart", agent.name)
    return revived
