"""The direct Messages API runtime: one non-streaming `POST /v1/messages` per turn.

It reads its credential from the per-spawn environment exactly as the CLI would, so
the same layering, overrides and shadowing rules apply to both runtimes. A chat
session's transcript lives in this process's memory (lost on restart): the direct
API has no session store, and the control plane's chat history is the record.

No forwarder stands between it and the provider, so it meters its own answer the way
the forwarder does (`agent_server/metering.py`): the turn's usage and cost are the
answer's `usage`, priced by the shared table. A key's budget is not enforced here: a
turn is one request, admitted by the platform's reservation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Final

import httpx

from agent_server.classifier import classify_runtime_refusal, parse_unified_reset
from agent_server.envlayer import API_KEY, AUTH_TOKEN, OAUTH_TOKEN
from agent_server.errors import TurnError
from agent_server.metering import GrantMeter
from agent_server.runtimes.base import Clock, Turn, TurnOutcome
from trinity_contract.prices import ANTHROPIC

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
ANTHROPIC_VERSION: Final = "2023-06-01"
OAUTH_BETA: Final = "oauth-2025-04-20"
MAX_TOKENS: Final = 4096


def auth_headers(env: Mapping[str, str]) -> dict[str, str]:
    """The credential headers for `env`, with the CLI's precedence.

    An API key beats a bearer token and an OAuth token, as it does in the CLI, so a
    shadowing `.env` key behaves the same on both runtimes. Raises TurnError(auth)
    when the environment carries no credential.
    """
    if env.get(API_KEY):
        return {"x-api-key": env[API_KEY]}
    if env.get(AUTH_TOKEN):
        return {"authorization": f"Bearer {env[AUTH_TOKEN]}"}
    if env.get(OAUTH_TOKEN):
        return {"authorization": f"Bearer {env[OAUTH_TOKEN]}", "anthropic-beta": OAUTH_BETA}
    raise TurnError(
        "auth",
        "no credential: none of ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, "
        "CLAUDE_CODE_OAUTH_TOKEN is set for this spawn",
    )


class AnthropicApiRuntime:
    name = "anthropic-api"
    # In-process and tool-less: no agent code runs, so it holds the credential itself.
    uses_forwarder = False

    def __init__(self, *, default_model: str, clock: Clock) -> None:
        self.default_model = default_model
        self.clock = clock
        self._transcripts: dict[str, list[dict[str, Any]]] = {}

    async def run(self, turn: Turn, env: Mapping[str, str]) -> TurnOutcome:
        history = self._transcripts.get(turn.session_id, []) if turn.session_id else []
        user_message = {"role": "user", "content": turn.message}
        model = turn.model or self.default_model
        body = {"model": model, "max_tokens": MAX_TOKENS, "messages": [*history, user_message]}
        response = await _post(env, body, timeout=turn.timeout_seconds)
        if response.status_code != 200:
            raise _refusal(response, self.clock)
        outcome = _outcome(response, model=model)
        if turn.session_id:
            self._transcripts[turn.session_id] = [
                *history,
                user_message,
                {"role": "assistant", "content": outcome.response},
            ]
        return outcome

    async def aclose(self) -> None:
        return None


async def _post(env: Mapping[str, str], body: dict[str, Any], *, timeout: float) -> httpx.Response:
    """POST ``body`` to the Messages API the environment names, with its credential.
    Raises TurnError: ``timeout`` past ``timeout`` seconds, ``upstream_error`` when
    nothing answers."""
    headers = {
        "anthropic-version": ANTHROPIC_VERSION,
        "content-type": "application/json",
        **auth_headers(env),
    }
    base_url = (env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    try:
        async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            return await asyncio.wait_for(
                client.post(f"{base_url}/v1/messages", headers=headers, json=body), timeout
            )
    except (TimeoutError, httpx.TimeoutException):
        raise TurnError("timeout", f"the turn exceeded timeout_seconds={timeout:g}") from None
    except httpx.TransportError as exc:
        raise TurnError(
            "upstream_error", f"the Messages API at {base_url} could not be reached: {exc}"
        ) from None


def _outcome(response: httpx.Response, *, model: str) -> TurnOutcome:
    """A served answer as the turn's outcome: its text, and its usage metered the way
    the forwarder meters (the turn's spend). TurnError ``container_fault`` when the
    body cannot be read."""
    try:
        payload = response.json()
        text = "".join(
            block.get("text", "")
            for block in payload.get("content", [])
            if block.get("type") == "text"
        )
        meter = GrantMeter(ANTHROPIC)
        # httpx already decoded the body: read it as plain JSON.
        reading = meter.request(headers={"content-type": "application/json"})
        reading.feed(response.content)
        reading.finish()
        metered = meter.summary()
        return TurnOutcome(
            response=text,
            model=str(payload.get("model") or model),
            input_tokens=metered.usage.input_tokens,
            output_tokens=metered.usage.output_tokens,
            cost_usd=metered.cost_usd,
            metered=metered,
        )
    except (ValueError, TypeError, AttributeError):
        raise TurnError(
            "container_fault", "the Messages API answered 200 with an unparseable body"
        ) from None


def _refusal(response: httpx.Response, clock: Clock) -> TurnError:
    message = response.text[:600]
    try:
        error = response.json().get("error") or {}
        message = f"{error.get('type', 'error')}: {error.get('message', '')}"
    except (ValueError, AttributeError):
        pass
    refusal = classify_runtime_refusal(
        api_error_status=response.status_code,
        text=message,
        now=clock(),
        reset_hint=parse_unified_reset(response.headers.get("anthropic-ratelimit-unified-reset")),
    )
    # Which window limits, as the provider names it: only a rate limit has one.
    claim = (response.headers.get("anthropic-ratelimit-unified-representative-claim") or "").strip()
    return TurnError(
        refusal.error_code,
        f"API Error: {response.status_code} {message}",
        refusal.resets_at,
        claim[:40] if claim and refusal.error_code == "rate_limit" else None,
    )
