"""Whether a client request is served at all, before any routing: its gateway key
(live, allowed this provider and the model's family), its body (bounded, JSON, a
model the gateway knows) and the key's limits. Each refusal is the provider-shaped
error the client's CLI or SDK shows; nothing reaches a provider."""

from __future__ import annotations

import functools
import logging
import secrets
from typing import TYPE_CHECKING, Any

from agent_server.relay import presented
from gateway import metrics
from gateway.catalog import ANTHROPIC, family_of
from gateway.open_streams import OpenStream
from gateway.server.exchange import Call
from gateway.server.inbound import BadRequest, parse, read_body
from gateway.server.keybook import KeyPolicy, read_by_digest
from gateway.server.shapes import answer_error
from trinity import clock

if TYPE_CHECKING:
    from gateway.server.app import GatewayApp

logger = logging.getLogger("gateway")


async def key_of(
    app: GatewayApp, scope: dict[str, Any], send: Any, provider: str
) -> KeyPolicy | None:
    """The live key the request presents, or None once a 401 was answered."""
    key = presented(scope["headers"])
    if not key:
        metrics.REFUSED.labels("auth").inc()
        await answer_error(send, provider, 401, "a gateway key is required (x-api-key or Bearer)")
        return None
    digest, policy, answered = app.keys.cached(key)
    if not answered:
        policy = await app.pool(read_by_digest, digest)
        app.keys.learn(digest, policy)
    refusal = "this gateway key is not valid" if policy is None else policy.refusal(clock.now())
    if refusal:
        metrics.REFUSED.labels("auth").inc()
        await answer_error(send, provider, 401, refusal)
        return None
    return policy


async def admit(
    app: GatewayApp, scope: dict[str, Any], receive: Any, send: Any, provider: str
) -> tuple[Call, KeyPolicy] | None:
    """The admitted request and its key, or None once the refusal was answered."""
    policy = await key_of(app, scope, send, provider)
    if policy is None:
        return None
    if not policy.allows(provider):
        metrics.REFUSED.labels("provider").inc()
        await answer_error(send, provider, 403, f"this gateway key may not use {provider}")
        return None
    try:
        body = await read_body(scope, receive, app.max_body)
        inbound = parse(provider, body, scope["headers"])
    except BadRequest as exc:
        metrics.REFUSED.labels("bad_request").inc()
        await answer_error(send, provider, exc.status, exc.message)
        return None
    family = family_of(provider, inbound.model)
    if family is None:
        metrics.REFUSED.labels("model").inc()
        code = None if provider == ANTHROPIC else "model_not_found"
        message = f"model: {inbound.model[:100]} is not a model the gateway serves"
        await answer_error(send, provider, 404, message, code=code)
        return None
    if not policy.allows(provider, family):
        metrics.REFUSED.labels("model").inc()
        await answer_error(send, provider, 403, f"this gateway key may not use {family} models")
        return None
    call = _call(app, scope, receive, send, provider, policy, inbound)
    refused = await app.limits.admit(
        key_id=policy.key_id, limits=policy.limits, request_id=call.request_id, now=call.at
    )
    if refused is not None:
        metrics.REFUSED.labels(refused.limit).inc()
        final = refused.limit not in ("requests_per_minute", "max_streams")
        message = f"this gateway key reached its {refused.words}"
        await answer_error(
            send, provider, 429, message, retry_after=refused.retry_after, final=final
        )
        return None
    call.on_served = functools.partial(app.streams.served, call.request_id)
    app.streams.add(
        OpenStream(
            request_id=call.request_id,
            key_id=policy.key_id,
            owner_id=policy.owner_id,
            provider=provider,
            model=inbound.model[:100],
            started_at=call.at.isoformat(),
            served_by="",
        )
    )
    return call, policy


def _call(
    app: GatewayApp,
    scope: dict[str, Any],
    receive: Any,
    send: Any,
    provider: str,
    policy: KeyPolicy,
    inbound: Any,
) -> Call:
    return Call(
        request_id="gw_" + secrets.token_hex(12),
        key_id=policy.key_id,
        owner_id=policy.owner_id,
        provider=provider,
        path=scope["path"],
        query=scope.get("query_string", b""),
        headers=scope["headers"],
        inbound=inbound,
        at=clock.now(),
        receive=receive,
        send=send,
    )
