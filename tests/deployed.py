"""What the deployment tests (compose, tests/deploy/test_compose_up.py; swarm stack,
tests/swarm/test_stack_deploy.py) do alike to a deployed platform from outside: wait
for /readyz, run a real turn over REST on a new plan and agent, send a person's request
to the gateway."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from simulator.control import SimulatorControl
from tests.subscriptions.factories import plan_token


def wait_ready(client: httpx.Client, *, seconds: float, describe: Callable[[], str]) -> None:
    """Poll /readyz until it answers 200; fails with its last answer and ``describe()``
    (the deployment's logs or state)."""
    deadline = time.monotonic() + seconds
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            response = client.get("/readyz")
            if response.status_code == 200:
                return
            last = f"{response.status_code} {response.text[:200]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(2)  # polling the deployment's web
    pytest.fail(f"/readyz did not answer 200 in {seconds} s: {last}\n{describe()}")


def turn_over_rest(
    client: httpx.Client,
    control: SimulatorControl,
    *,
    plan: str,
    agent: str,
    describe: Callable[[], str],
) -> None:
    """A plan the simulator knows, added over REST with ``client`` (an admin's token),
    an agent on it, and a real turn the plan serves."""
    token = plan_token()
    control.register(token, kind="oauth", label=plan)
    response = client.post(
        "/api/subscriptions",
        json={"name": plan, "token": token, "provider": "anthropic", "plan_type": "max-20x"},
    )
    assert response.status_code in (200, 201), response.text
    response = client.post("/api/agents", json={"name": agent})
    assert response.status_code == 201, response.text
    response = client.post(f"/api/agents/{agent}/task", json={"message": "say hi"})
    assert response.status_code == 200, f"{response.text}\n{describe()}"
    assert response.json()["served_by_subscription"]["name"] == plan


def gateway_message(base_url: str, key: str) -> httpx.Response:
    """A person's one Messages request through the gateway at ``base_url``."""
    return httpx.post(
        f"{base_url}/v1/messages",
        headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
        json={
            "model": "claude-sonnet-5-5",
            "max_tokens": 16,
            "messages": [{"role": "user", "content": "hi"}],
        },
        timeout=60,
    )
