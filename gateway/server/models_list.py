"""``GET /v1/models``: the models the caller's key may use, in the shape of the API
the client speaks (an ``anthropic-version`` header: Anthropic's; else OpenAI's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_server.relay import answer_json
from gateway.catalog import ANTHROPIC, OPENAI, allowed_models
from gateway.server.admission import key_of

if TYPE_CHECKING:
    from gateway.server.app import GatewayApp

# Models carry no real creation date here; a fixed one keeps answers stable.
CREATED = "2025-01-01T00:00:00Z"
CREATED_UNIX = 1735689600


async def models_answer(app: GatewayApp, scope: dict[str, Any], send: Any) -> None:
    anthropic = any(name.lower() == b"anthropic-version" for name, _ in scope["headers"])
    provider = ANTHROPIC if anthropic else OPENAI
    policy = await key_of(app, scope, send, provider)
    if policy is None:
        return
    pairs = allowed_models(sorted(policy.providers), sorted(policy.families))
    if anthropic:
        data = [
            {"type": "model", "id": model, "display_name": model, "created_at": CREATED}
            for owner, model in pairs
            if owner == ANTHROPIC
        ]
        body: dict[str, Any] = {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    else:
        body = {
            "object": "list",
            "data": [
                {"id": model, "object": "model", "created": CREATED_UNIX, "owned_by": owner}
                for owner, model in pairs
            ],
        }
    await answer_json(send, 200, body)
