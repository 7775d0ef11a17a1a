"""The one module that talks to agent servers (httpx, timeouts, the shared secret).

The wire format is the JSON contract documented in docs/flows/agent-server.md and
pinned by tests on both sides; this module does not import agent_server.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from django.utils.dateparse import parse_datetime

from trinity.crypto import Secret
from trinity.redaction import redact

logger = logging.getLogger(__name__)

AUTH_OVERRIDE_HEADER = "X-Trinity-Auth-Override"
CONNECT_TIMEOUT = 5.0
CONTROL_TIMEOUT = 15.0
# A turn's HTTP call waits for the runtime's own timeout plus this margin, so the
# agent server answers 504 itself instead of the client cutting the line first.
TURN_TIMEOUT_MARGIN = 30.0


@dataclass(frozen=True)
class AuthOverride:
    """The credential one turn runs on: an OAuth plan token XOR an API key."""

    kind: str  # "oauth_token" | "api_key"
    secret: Secret

    def __post_init__(self) -> None:
        if self.kind not in ("oauth_token", "api_key"):
            raise ValueError(f"unknown override kind {self.kind!r}")

    def as_json(self) -> dict[str, str]:
        return {self.kind: self.secret.reveal()}


@dataclass(frozen=True)
class TurnOutcome:
    """What the agent server answered for one turn attempt."""

    status_code: int
    ok: bool
    response: str = ""
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    error_code: str = ""
    detail: str = ""
    resets_at: datetime | None = None
    override_echo: str | None = None


class AgentServerUnavailable(Exception):
    """The agent server could not be reached or answered outside the contract."""


class AgentServerClient:
    def __init__(self, *, endpoint: str, secret: Secret) -> None:
        if not endpoint:
            raise AgentServerUnavailable("the agent has no endpoint (is it started?)")
        self.endpoint = endpoint.rstrip("/")
        self._secret = secret

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._secret.reveal()}"}

    def _request(
        self, method: str, path: str, *, json: dict[str, Any] | None = None, timeout: float
    ) -> httpx.Response:
        try:
            with httpx.Client(timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT)) as http:
                return http.request(
                    method, f"{self.endpoint}{path}", json=json, headers=self._headers()
                )
        except httpx.HTTPError as exc:
            # httpx messages carry the URL only; redact anyway, a proxy may echo more.
            raise AgentServerUnavailable(
                redact(f"{type(exc).__name__} talking to {self.endpoint}{path}: {exc}")
            ) from None

    def health(self) -> dict[str, Any]:
        """GET /health; raises AgentServerUnavailable unless it answers 200."""
        response = self._request("GET", "/health", timeout=CONTROL_TIMEOUT)
        if response.status_code != 200:
            raise AgentServerUnavailable(f"health answered {response.status_code}")
        return dict(response.json())

    def run_turn(
        self,
        *,
        execution_id: str,
        message: str,
        timeout_seconds: float,
        model: str | None = None,
        auth_override: AuthOverride | None = None,
        session_id: str | None = None,
    ) -> TurnOutcome:
        """POST /api/task (or /api/chat with a session id) and parse the typed answer."""
        body: dict[str, Any] = {
            "execution_id": execution_id,
            "message": message,
            "timeout_seconds": timeout_seconds,
        }
        if model:
            body["model"] = model
        if auth_override is not None:
            body["auth_override"] = auth_override.as_json()
        path = "/api/task"
        if session_id:
            body["session_id"] = session_id
            path = "/api/chat"
        response = self._request(
            "POST", path, json=body, timeout=timeout_seconds + TURN_TIMEOUT_MARGIN
        )
        return parse_turn_response(response)

    def reload_token(self, *, token: Secret, remove_api_key: bool) -> list[str]:
        """POST /api/credentials/reload-token; returns the env_shadow names.

        Raises AgentServerUnavailable on transport failure and ReloadRefused (with the
        status) when the server answers anything but 200.
        """
        response = self._request(
            "POST",
            "/api/credentials/reload-token",
            json={"token": token.reveal(), "remove_api_key": remove_api_key},
            timeout=CONTROL_TIMEOUT,
        )
        if response.status_code != 200:
            raise ReloadRefused(response.status_code)
        return [str(name) for name in response.json().get("env_shadow", [])]


class ReloadRefused(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"reload-token answered {status_code}")
        self.status_code = status_code


def parse_turn_response(response: httpx.Response) -> TurnOutcome:
    """Map an agent-server answer to a TurnOutcome; anything off-contract is a fault."""
    echo = response.headers.get(AUTH_OVERRIDE_HEADER)
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return TurnOutcome(
            status_code=response.status_code,
            ok=False,
            error_code="container_fault",
            detail=f"agent server answered {response.status_code} without a JSON body",
            override_echo=echo,
        )
    if response.status_code == 200:
        usage = data.get("usage") or {}
        return TurnOutcome(
            status_code=200,
            ok=True,
            response=str(data.get("response", "")),
            model=str(data.get("model", "")),
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            cost_usd=data.get("cost_usd"),
            override_echo=echo,
        )
    resets_at = parse_datetime(data["resets_at"]) if data.get("resets_at") else None
    return TurnOutcome(
        status_code=response.status_code,
        ok=False,
        error_code=str(data.get("error_code") or "container_fault"),
        detail=redact(str(data.get("detail", ""))),
        resets_at=resets_at,
        override_echo=echo,
    )
