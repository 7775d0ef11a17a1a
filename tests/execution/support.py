"""Helpers for end-to-end turn tests: the platform's objects on the simulator, turns
through the REST API, and the real processes a turn runs in."""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from agents.models import Agent
from routing import billing
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from subscriptions.models import Subscription
from subscriptions.tokens import plan_token_fingerprint, validate_plan_token
from tests import procs
from tests.agents.factories import AgentFactory
from tests.procs import cmdline
from tests.session_canary import MARKER
from tests.subscriptions.factories import SubscriptionFactory, plan_token
from trinity.crypto import Secret
from trinity_contract.codex import AUTH_CLAIMS


def wait_until(check: Callable[[], Any], *, seconds: float, what: str) -> Any:
    """Poll ``check`` (a real process's state) until it returns something truthy."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {seconds} s")
        time.sleep(0.05)  # polling a real process, not waiting for time to pass


# The upstream and the platform's objects


def register_plan(control: SimulatorControl, name: str) -> tuple[Subscription, str]:
    """A plan subscription known to the simulator and to the platform, not read yet.

    Made as the service stores it, but not through it: the service's first look would
    read the plan's usage before the test sets the usage it is about.
    """
    token = plan_token()
    control.register(token, kind="oauth", label=name)
    entry = billing.lookup("anthropic", "max-20x")
    assert entry is not None
    subscription = SubscriptionFactory.create(
        name=name,
        token=Secret(token),
        billing_class=entry.billing_class,
        overage=entry.overage,
    )
    return subscription, token


def codex_access_token(account: str, *, expires_in: float) -> str:
    """A ChatGPT access token shaped like the real ones (a JWT; the session canary's
    marker in its signature part)."""

    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    claims = {"exp": int(time.time() + expires_in), AUTH_CLAIMS: {"chatgpt_account_id": account}}
    return f"{part({'alg': 'none'})}.{part(claims)}.{MARKER}{secrets.token_urlsafe(16)}"


def register_codex_plan(
    control: SimulatorControl, name: str, *, expires_in: float = 3600
) -> tuple[Subscription, str]:
    """A Codex plan as an operator registers it (the auth.json `codex login` wrote), its
    sign-in known to the simulator. Stored as the service stores it, but not through
    it: its first look would read (and refresh) the plan before the test sets what it
    is about."""
    account = f"acct-{name}"
    token = codex_access_token(account, expires_in=expires_in)
    refresh = f"rt-{MARKER}-{secrets.token_urlsafe(16)}"
    control.register(token, kind="codex", label=name, account_id=account, refresh_token=refresh)
    auth = {
        "OPENAI_API_KEY": None,
        "tokens": {"access_token": token, "refresh_token": refresh, "account_id": account},
    }
    stored = validate_plan_token(provider="openai-codex", token=json.dumps(auth))
    plan = SubscriptionFactory.create(
        name=name,
        provider="openai-codex",
        plan_type="pro",
        token=Secret(stored),
        token_fingerprint=plan_token_fingerprint(provider="openai-codex", token=stored),
    )
    return plan, token


def agent_on(owner: Any, subscription: Subscription, name: str = "bot") -> Agent:
    agent = AgentFactory.create(name=name, owner=owner)
    return subscription_services.assignment_set(agent=agent, subscription_id=subscription.pk)


def messages_sent(control: SimulatorControl) -> list[tuple[str | None, int]]:
    """(credential, status) of every turn's Messages request the upstream saw, in order."""
    return [
        (r["credential"], r["status"])
        for r in control.requests()
        if r["path"] == "/v1/messages" and r["stream"]
    ]


def task(client: APIClient, *, agent: str = "bot", **body: Any) -> dict[str, Any]:
    """POST a turn to ``agent``; its body with the HTTP status as ``http_status``."""
    response = client.post(
        f"/api/agents/{agent}/task", {"message": "say hi", **body}, format="json"
    )
    data: dict[str, Any] = response.json()
    data["http_status"] = response.status_code
    return data


def turn_in_background(client: APIClient, **body: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Post a turn from a thread with its own database connection (closed after)."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result.update(task(client, **body))
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="turn-in-background")
    thread.start()
    return thread, result


# Processes


def children_of(pid: int) -> list[tuple[int, bytes]]:
    """The children of ``pid`` with their command lines."""
    return [(child.pid, cmdline(child.pid)) for child in procs.children_of(pid)]


def descendants_of(pid: int) -> list[tuple[int, bytes]]:
    """Every process below ``pid`` with its command line, nearest first."""
    return [(child.pid, cmdline(child.pid)) for child in procs.descendants_of(pid)]


def cli_child(agent: Agent, *, seconds: float = 30.0) -> int:
    """The pid of the Claude Code CLI the agent's server spawned for a turn in flight."""
    server = int(agent.process_handle)

    def find() -> int | None:
        # Below the server: in the sandbox the CLI runs under bwrap, not as its child.
        for pid, command in descendants_of(server):
            if b"claude" in command:
                return pid
        return None

    return int(wait_until(find, seconds=seconds, what="the CLI to start"))
