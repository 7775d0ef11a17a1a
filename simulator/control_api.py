"""The simulator's control API (``/_control/``, loopback only): what tests, the bench
and the demo set and read of the world. ``simulator/control.py`` is its client.

Each group of routes is mounted by its own function, over the state it reads: the
world (``Simulator``), and for the latency the answering state that holds answers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel, Field

from simulator import codex, oauth
from simulator.answering import Answering
from simulator.anthropic import UPSTREAM_ERRORS
from simulator.redteam import ToolScript
from simulator.state import Credential, CredentialKind, LatencyScope, SignIn, Simulator, iso

LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def control_allowed_from() -> frozenset[str]:
    """Who may call the control API: loopback, plus the addresses SIMULATOR_CONTROL_FROM
    lists (comma-separated): a simulator on a container network's gateway is controlled
    by the host from that gateway address, which no container on the network has."""
    extra = os.environ.get("SIMULATOR_CONTROL_FROM", "")
    return frozenset(LOOPBACK | {a.strip() for a in extra.split(",") if a.strip()})


# the bodies


class CredentialIn(BaseModel):
    token: str = Field(min_length=8)
    kind: CredentialKind
    label: str | None = None
    capacity: dict[str, int] | None = None
    credit_usd: float | None = None
    usage_scope: bool | None = None
    plan_type: str | None = None
    usage_delay_ms: int | None = Field(default=None, ge=0, le=600_000)
    # Codex (ChatGPT sign-in) only: simulator/codex.py.
    account_id: str | None = Field(default=None, min_length=1)
    refresh_token: str | None = Field(default=None, min_length=8)
    expires_in: int | None = Field(default=None, ge=1)
    email: str | None = None
    user_id: str | None = Field(default=None, min_length=1)

    def sign_in(self) -> SignIn | None:
        fields = (self.account_id, self.refresh_token, self.expires_in, self.email, self.user_id)
        if all(value is None for value in fields):
            return None
        return SignIn(*fields)


class UsageThrottleIn(BaseModel):
    token: str
    seconds: float = Field(ge=0)


class UsageIn(BaseModel):
    token: str
    window: str
    percent: float | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)
    resets_in: float | None = Field(default=None, gt=0)


class ResetJitterIn(BaseModel):
    token: str
    offsets: list[int] = Field(default_factory=list, max_length=100)


class RevokeIn(BaseModel):
    token: str
    revoked: bool = True


class CreditIn(BaseModel):
    token: str
    add_usd: float


class ScopeIn(BaseModel):
    token: str
    allowed: bool


class ClockSetIn(BaseModel):
    at: datetime | float


class ClockAdvanceIn(BaseModel):
    seconds: float


class LatencyIn(BaseModel):
    ms: int = Field(ge=0, le=60_000)
    scope: LatencyScope = "all"


class UpstreamErrorIn(BaseModel):
    # 0 lifts the outage.
    status: int = Field(ge=0)
    retryable: bool = True


class RedTeamIn(BaseModel):
    trigger: str = Field(min_length=8)
    reads: list[str] = Field(default_factory=list, max_length=5000)
    commands: list[str] = Field(default_factory=list, max_length=100)


class ModelIn(BaseModel):
    name: str = Field(min_length=1)


# the routes


def add_control_api(app: FastAPI, answering: Answering) -> None:
    """Mount the control API on ``app``: every route under ``/_control/``, refused (403)
    to a caller not among ``control_allowed_from()`` as it reads now."""
    allowed = control_allowed_from()

    def loopback_only(request: Request) -> None:
        host = request.client.host if request.client else None
        if host not in allowed:
            raise HTTPException(status_code=403, detail="control API is loopback only")

    control = APIRouter(prefix="/_control", dependencies=[Depends(loopback_only)])
    sim = answering.sim
    known = known_credential(sim)

    @control.get("/health")
    async def health() -> dict[str, Any]:
        return {"ok": True}

    add_credential_routes(control, sim, known)
    add_credential_state_routes(control, sim, known)
    add_clock_routes(control, sim)
    add_request_log_routes(control, sim)
    add_latency_routes(control, answering)
    add_upstream_error_routes(control, sim)
    add_stream_pause_routes(control, sim)
    add_red_team_routes(control, sim)
    add_model_routes(control, sim)

    @control.post("/reset")
    async def reset() -> dict[str, Any]:
        sim.reset()
        answering.release_held()
        return {"ok": True}

    codex.add_codex_control(control, sim, known)
    oauth.add_oauth_control(control, sim)
    app.include_router(control)


def known_credential(sim: Simulator) -> Callable[[str], Credential]:
    """A lookup of a registered credential by token that answers 404 for an unknown one."""

    def known(token: str) -> Credential:
        try:
            return sim.lookup(token)
        except KeyError:
            # The token itself is never echoed back.
            raise HTTPException(status_code=404, detail="unknown credential") from None

    return known


def add_credential_routes(
    control: APIRouter, sim: Simulator, known: Callable[[str], Credential]
) -> None:
    """Registering credentials, listing them, and setting their usage."""

    @control.post("/credentials")
    async def register(body: CredentialIn) -> dict[str, object]:
        try:
            cred = sim.register(
                token=body.token,
                kind=body.kind,
                label=body.label,
                capacity=body.capacity,
                credit_usd=body.credit_usd,
                usage_scope=body.usage_scope,
                plan_type=body.plan_type,
                usage_delay_ms=body.usage_delay_ms,
                sign_in=body.sign_in(),
            )
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        return cred.view(sim.clock.now())

    @control.get("/credentials")
    async def credentials(label: str | None = None) -> list[dict[str, object]]:
        now = sim.clock.now()
        return [c.view(now) for c in sim.credentials.values() if label is None or c.label == label]

    @control.post("/credentials/usage")
    async def set_usage(body: UsageIn) -> dict[str, object]:
        known(body.token)
        try:
            cred = sim.set_usage(
                body.token,
                body.window,
                percent=body.percent,
                tokens=body.tokens,
                resets_in=body.resets_in,
            )
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        return cred.view(sim.clock.now())


def add_credential_state_routes(
    control: APIRouter, sim: Simulator, known: Callable[[str], Credential]
) -> None:
    """Changing one registered credential's state: its reset jitter, revocation, credit,
    usage scope and usage throttle."""

    @control.post("/credentials/reset-jitter")
    async def reset_jitter(body: ResetJitterIn) -> dict[str, object]:
        cred = known(body.token)
        if any(abs(offset) > 3600 for offset in body.offsets):
            raise HTTPException(status_code=400, detail="a jitter offset is at most 3600 s")
        cred.reset_jitter, cred.jitter_turn = list(body.offsets), 0
        return cred.view(sim.clock.now())

    @control.post("/credentials/revoke")
    async def revoke(body: RevokeIn) -> dict[str, object]:
        cred = known(body.token)
        cred.revoked = body.revoked
        return cred.view(sim.clock.now())

    @control.post("/credentials/credit")
    async def add_credit(body: CreditIn) -> dict[str, object]:
        cred = known(body.token)
        cred.credit_usd += body.add_usd
        return cred.view(sim.clock.now())

    @control.post("/credentials/usage-scope")
    async def usage_scope(body: ScopeIn) -> dict[str, object]:
        cred = known(body.token)
        cred.usage_scope = body.allowed
        return cred.view(sim.clock.now())

    @control.post("/credentials/usage-throttle")
    async def usage_throttle(body: UsageThrottleIn) -> dict[str, object]:
        cred = known(body.token)
        now = sim.clock.now()
        cred.usage_throttled_until = now + body.seconds if body.seconds else None
        return cred.view(now)


def add_clock_routes(control: APIRouter, sim: Simulator) -> None:
    """Reading the simulated clock, setting it, advancing it, and back to real time."""

    def clock_view() -> dict[str, Any]:
        now = sim.clock.now()
        return {"now": iso(now), "unix": now, "frozen": sim.clock.frozen_at is not None}

    @control.get("/clock")
    async def clock() -> dict[str, Any]:
        return clock_view()

    @control.post("/clock/set")
    async def clock_set(body: ClockSetIn) -> dict[str, Any]:
        at = body.at
        if isinstance(at, datetime):
            if at.tzinfo is None:
                raise HTTPException(status_code=400, detail="clock instant must carry a timezone")
            sim.clock.set(at.timestamp())
        else:
            sim.clock.set(float(at))
        return clock_view()

    @control.post("/clock/advance")
    async def clock_advance(body: ClockAdvanceIn) -> dict[str, Any]:
        sim.clock.advance(body.seconds)
        return clock_view()

    @control.post("/clock/real")
    async def clock_real() -> dict[str, Any]:
        sim.clock.use_real_time()
        return clock_view()


def add_request_log_routes(control: APIRouter, sim: Simulator) -> None:
    """Reading the request log, and clearing it."""

    @control.get("/requests")
    async def requests() -> list[dict[str, object]]:
        return [r.as_dict() for r in sim.requests]

    @control.delete("/requests")
    async def clear_requests() -> dict[str, Any]:
        sim.requests.clear()
        return {"ok": True}


def add_latency_routes(control: APIRouter, answering: Answering) -> None:
    """Reading the injected latency and setting it: a change releases every answer the
    old latency was holding."""
    sim = answering.sim

    @control.get("/latency")
    async def latency() -> dict[str, Any]:
        return answering.latency_view()

    @control.post("/latency")
    async def set_latency(body: LatencyIn) -> dict[str, Any]:
        if body.scope == "all":
            sim.latency_all_ms = body.ms
        else:
            sim.latency_usage_ms = body.ms
        answering.release_held()
        return answering.latency_view()


class StreamPauseIn(BaseModel):
    ms: int = Field(ge=0, le=60_000)


def add_stream_pause_routes(control: APIRouter, sim: Simulator) -> None:
    """A pause between the events of every streamed answer, and how many streams their
    client left early."""

    def view() -> dict[str, int]:
        return {"ms": sim.stream_pause_ms, "cut": sim.streams_cut}

    @control.get("/stream-pause")
    async def stream_pause() -> dict[str, int]:
        return view()

    @control.post("/stream-pause")
    async def set_stream_pause(body: StreamPauseIn) -> dict[str, int]:
        sim.stream_pause_ms = body.ms
        return view()


def add_upstream_error_routes(control: APIRouter, sim: Simulator) -> None:
    """Reading the provider-wide outage, and setting or lifting it."""

    def upstream_error_view() -> dict[str, Any]:
        return {"status": sim.upstream_error_status, "retryable": sim.upstream_error_retryable}

    @control.get("/upstream-error")
    async def upstream_error() -> dict[str, Any]:
        return upstream_error_view()

    @control.post("/upstream-error")
    async def set_upstream_error(body: UpstreamErrorIn) -> dict[str, Any]:
        if body.status and body.status not in UPSTREAM_ERRORS:
            known_statuses = ", ".join(str(s) for s in sorted(UPSTREAM_ERRORS))
            raise HTTPException(
                status_code=400, detail=f"status must be 0 or one of {known_statuses}"
            )
        sim.upstream_error_status = body.status
        sim.upstream_error_retryable = body.retryable
        return upstream_error_view()


def add_red_team_routes(control: APIRouter, sim: Simulator) -> None:
    """Arming, reading and disarming the scripted tool-using model
    (``simulator/redteam.py``). Its view carries what the agent's tools returned,
    verbatim: the red-team test's evidence."""

    @control.post("/red-team")
    async def arm_red_team(body: RedTeamIn) -> dict[str, Any]:
        sim.red_team = ToolScript(trigger=body.trigger, reads=body.reads, commands=body.commands)
        return sim.red_team.view()

    @control.get("/red-team")
    async def red_team() -> dict[str, Any]:
        return sim.red_team.view() if sim.red_team is not None else {}

    @control.delete("/red-team")
    async def disarm_red_team() -> dict[str, Any]:
        sim.red_team = None
        return {"ok": True}


def add_model_routes(control: APIRouter, sim: Simulator) -> None:
    """Listing the Anthropic models the simulator knows, and adding one."""

    @control.get("/models")
    async def models() -> list[str]:
        return sorted(sim.models)

    @control.post("/models")
    async def add_model(body: ModelIn) -> list[str]:
        sim.models.add(body.name)
        return sorted(sim.models)
