"""The typed error codes of an agent server's refusals, and the HTTP status of each.

The agent server answers every refused turn with one of these codes
(``agent_server.contract.ErrorBody``); the platform reads the code first and the
text second (``routing/attempt_refusal.py``). A code outside this set is an agent
server off contract, and only its text is read.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

ErrorCode = Literal[
    "rate_limit",
    "auth",
    "model_unsupported",
    "container_fault",
    "timeout",
    "runtime_killed",
    "upstream_error",
    # The key's budget (the platform's cap, passed with the key) was reached at the
    # forwarder: no provider refused anything, and no other credential is tried.
    "billing",
    "invalid_request",
    "unauthorized",
    # The platform cancelled the turn (POST /api/turns/{execution_id}/cancel): its
    # process group was killed, or it was never started. Says nothing of a credential.
    "cancelled",
]

ERROR_CODES: Final[frozenset[str]] = frozenset(get_args(ErrorCode))

# One status per code, so a client can branch on either and never see them disagree.
ERROR_STATUS: Final[dict[str, int]] = {
    "rate_limit": 429,
    "auth": 503,
    "model_unsupported": 400,
    "container_fault": 503,
    "timeout": 504,
    "runtime_killed": 500,
    "upstream_error": 502,
    "billing": 402,
    "invalid_request": 400,
    "unauthorized": 401,
    "cancelled": 409,
}
