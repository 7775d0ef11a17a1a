"""The forwarder meters what the provider bills and refuses a key at its budget.

Real parts: a forwarder started on its own loopback listener, the provider simulator
as its upstream (which bills its keys by the shared price table), a real HTTP client
standing for the CLI and for agent code that spends the capability directly. The
ledger the forwarder keeps is compared with what the simulator charged the key.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from agent_server.forwarder import Forwarder, Grant, HeaderShape
from trinity_contract.redaction import Redactor

if TYPE_CHECKING:
    from simulator.process import SimulatorProcess

pytestmark = pytest.mark.e2e

BUDGET_NAME = "the platform key's daily budget of $1.00 for agent 'bot'"
# About 100k input tokens a request (the simulator counts four characters a token).
LARGE = "lorem ipsum " * 33_000


def messages(
    *, stream: bool, text: str = LARGE, model: str = "claude-sonnet-4-5"
) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 64,
        "stream": stream,
        "messages": [{"role": "user", "content": text}],
    }


def responses(*, stream: bool, text: str = LARGE) -> dict[str, Any]:
    return {
        "model": "gpt-5.1-codex",
        "stream": stream,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}],
    }


Scenario = Callable[[Grant, httpx.AsyncClient], Awaitable[None]]


def through_forwarder(
    sim: SimulatorProcess,
    scenario: Scenario,
    *,
    shape: HeaderShape,
    secret: str,
    budget_usd: float | None = None,
    account_id: str | None = None,
) -> Grant:
    """Run ``scenario`` with a live grant on a started forwarder; return the grant."""

    async def main() -> Grant:
        forwarder = Forwarder(
            upstream=sim.base_url,
            codex_upstream=sim.base_url,
            openai_upstream=sim.base_url,
            redactor=Redactor(),
        )
        await forwarder.start()
        try:
            with forwarder.grant(
                shape=shape,
                secret=secret,
                account_id=account_id,
                budget_usd=budget_usd,
                budget_name=BUDGET_NAME,
            ) as grant:
                header = "x-api-key" if shape == "x-api-key" else "authorization"
                value = grant.capability if shape == "x-api-key" else f"Bearer {grant.capability}"
                async with httpx.AsyncClient(
                    base_url=forwarder.base_url, timeout=60, headers={header: value}
                ) as client:
                    await scenario(grant, client)
            return grant
        finally:
            await forwarder.aclose()

    return asyncio.run(main())


def billed(sim: SimulatorProcess, label: str) -> float:
    return sim.control.credential(label)["charged_usd"]


def served_paths(sim: SimulatorProcess) -> list[tuple[str, int]]:
    return [(r["path"], r["status"]) for r in sim.control.requests()]


def test_a_key_grant_meters_what_the_provider_bills_streamed_or_not(sim: SimulatorProcess) -> None:
    key = "sk-ant-api03-meter-" + secrets.token_hex(8)
    sim.control.register(key, kind="api_key", label="key", credit_usd=100)

    async def scenario(grant: Grant, client: httpx.AsyncClient) -> None:
        for stream, model in ((True, "claude-sonnet-4-5"), (False, "claude-haiku-4-5")):
            answer = await client.post("/v1/messages", json=messages(stream=stream, model=model))
            assert answer.status_code == 200
        # A token count is free: not metered.
        counted = await client.post("/v1/messages/count_tokens", json=messages(stream=False))
        assert counted.status_code == 200

    grant = through_forwarder(sim, scenario, shape="x-api-key", secret=key)

    metered = grant.meter.summary()
    assert metered.requests == 2 and metered.unmetered == 0
    assert set(metered.by_model) == {"claude-sonnet-4-5", "claude-haiku-4-5"}
    assert metered.cost_usd == pytest.approx(billed(sim, "key"), rel=1e-9)
    assert metered.cost_usd > 0.3  # two requests of ~100k input tokens


def test_a_key_grant_is_refused_once_its_metered_spend_reaches_the_budget(
    sim: SimulatorProcess,
) -> None:
    key = "sk-ant-api03-budget-" + secrets.token_hex(8)
    sim.control.register(key, kind="api_key", label="key", credit_usd=100)
    answers: list[httpx.Response] = []

    async def scenario(grant: Grant, client: httpx.AsyncClient) -> None:
        for i in range(8):
            answers.append(await client.post("/v1/messages", json=messages(stream=i % 2 == 0)))
        answers.append(await client.post("/v1/messages/count_tokens", json=messages(stream=False)))

    grant = through_forwarder(sim, scenario, shape="x-api-key", secret=key, budget_usd=1.0)

    statuses = [a.status_code for a in answers[:-1]]
    # ~$0.30 a request on Sonnet: the fourth passes $1, then every request is refused.
    assert statuses == [200, 200, 200, 200, 429, 429, 429, 429], statuses
    refusal = answers[4]
    assert refusal.headers["x-should-retry"] == "false"
    body = refusal.json()
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
    assert body["error"]["message"].startswith(
        "The platform key's daily budget of $1.00 for agent 'bot' is reached"
    )
    assert answers[-1].status_code == 200  # a token count costs nothing, so it still passes
    metered = grant.meter.summary()
    assert (metered.requests, metered.budget_refused) == (4, 4)
    # Nothing refused reached the provider, and the ledger is the provider's bill.
    assert [s for p, s in served_paths(sim) if p == "/v1/messages"] == [200] * 4
    assert metered.cost_usd == pytest.approx(billed(sim, "key"), rel=1e-9)
    assert 1.0 <= metered.cost_usd < 1.0 + 0.35  # past it by at most the last request


def test_concurrent_requests_cannot_run_far_past_the_budget(sim: SimulatorProcess) -> None:
    """Agent code firing many requests at once: at most MAX_IN_FLIGHT are in flight,
    so the spend passes the budget by at most that many requests."""
    key = "sk-ant-api03-burst-" + secrets.token_hex(8)
    sim.control.register(key, kind="api_key", label="key", credit_usd=100)
    statuses: list[int] = []

    async def scenario(grant: Grant, client: httpx.AsyncClient) -> None:
        sent = [client.post("/v1/messages", json=messages(stream=True)) for _ in range(40)]
        statuses.extend(a.status_code for a in await asyncio.gather(*sent))

    grant = through_forwarder(sim, scenario, shape="x-api-key", secret=key, budget_usd=0.5)

    assert statuses.count(429) >= 40 - 8 - 2, statuses
    assert grant.meter.cost_usd == pytest.approx(billed(sim, "key"), rel=1e-9)
    assert grant.meter.cost_usd <= 0.5 + 8 * 0.35


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_a_codex_key_grant_meters_responses_and_refuses_in_openai_shape(
    sim: SimulatorProcess, stream: bool
) -> None:
    key = "sk-proj-meter-" + secrets.token_hex(8)
    sim.control.register(key, kind="openai_key", label="openai-key", credit_usd=100)
    answers: list[httpx.Response] = []

    async def scenario(grant: Grant, client: httpx.AsyncClient) -> None:
        for _ in range(6):
            answers.append(await client.post("/v1/responses", json=responses(stream=stream)))

    # ~$0.125 a request on gpt-5.1-codex (100k input tokens at $1.25/M).
    grant = through_forwarder(sim, scenario, shape="openai-key", secret=key, budget_usd=0.3)

    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429, 429]
    error = answers[3].json()["error"]
    assert error["code"] == "insufficient_quota"
    assert "budget of $1.00 for agent 'bot' is reached" in error["message"]
    metered = grant.meter.summary()
    assert set(metered.by_model) == {"gpt-5.1-codex"}
    assert metered.cost_usd == pytest.approx(billed(sim, "openai-key"), rel=1e-9)


def test_a_codex_plan_grant_is_metered_for_headroom_and_never_refused(
    sim: SimulatorProcess,
) -> None:
    token = "codex-plan-" + secrets.token_hex(8)
    account = sim.control.register(token, kind="codex", label="codex-plan")["account_id"]

    async def scenario(grant: Grant, client: httpx.AsyncClient) -> None:
        for _ in range(2):
            answer = await client.post("/v1/responses", json=responses(stream=True))
            assert answer.status_code == 200
            assert "response.completed" in answer.text

    grant = through_forwarder(sim, scenario, shape="codex-plan", secret=token, account_id=account)

    metered = grant.meter.summary()
    assert metered.requests == 2 and metered.budget_refused == 0
    used = sim.control.credential("codex-plan")["windows"]["five_hour"]["used"]
    assert metered.usage.input_tokens + metered.usage.output_tokens == used


def test_a_plan_grant_is_metered_without_a_budget(sim: SimulatorProcess) -> None:
    token = "sk-ant-oat01-meter-" + secrets.token_hex(8)
    sim.control.register(token, kind="oauth", label="plan")

    async def scenario(grant: Grant, client: httpx.AsyncClient) -> None:
        for _ in range(5):
            answer = await client.post("/v1/messages", json=messages(stream=True))
            assert answer.status_code == 200

    grant = through_forwarder(sim, scenario, shape="bearer", secret=token)

    metered = grant.meter.summary()
    assert metered.requests == 5 and metered.budget_refused == 0
    used = sim.control.credential("plan")["windows"]["five_hour"]["used"]
    assert metered.usage.input_tokens + metered.usage.output_tokens == used
    assert json.dumps(metered.cost_usd)  # priced as the key would be, for comparison
