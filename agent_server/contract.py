"""The JSON contract between the control plane and an agent server.

Both sides pin these shapes: `tests/agent_server/test_contract.py` snapshots the JSON
schema and the canonical example payloads below, and the Django-side client pins the
same examples. Change a shape here only together with the snapshot and the client.

Streamed turns: `/api/task` and `/api/chat` with `"stream": true` answer `200`,
`Content-Type: application/x-ndjson` (with the same `X-Trinity-Auth-Override` header
as a plain answer), one JSON object a line: zero or more `StreamEventLine`s as the
turn runs, then exactly one `StreamResultLine` whose `status` and `body` are exactly
the plain answer's (a `TaskResponse` / `ChatResponse` on 200, an `ErrorBody`
otherwise). A request refused before the turn starts (401, 400) is answered as plain
JSON. Every event string is redacted and bounded (`TextEvent` .. `TruncatedEvent`);
per spawn at most 1000 events or 256 KiB of event text, then one `TruncatedEvent`
and no more events; CLI lines that cannot be read (not JSON, other shapes, over
1 MiB) show nothing. A client that leaves a stream ends its turn: the spawn is
killed as a cancelled one is (the id is not remembered as cancelled).

Cancel: `POST /api/turns/{execution_id}/cancel` answers `CancelResponse`; a running
turn of that id has its whole process group SIGKILLed and answers the `cancelled`
ErrorBody (409). The id is remembered (the last 1024, 15 minutes): a turn request
for it later answers `cancelled` at once and spawns nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, Field, SecretStr

from trinity_contract.errors import ErrorCode

AUTH_OVERRIDE_HEADER: Final = "X-Trinity-Auth-Override"

OverrideKind = Literal["oauth_token", "api_key"]


@dataclass(frozen=True)
class AppliedOverride:
    """The one credential a request asked to run on, for this spawn only."""

    kind: OverrideKind
    secret: str
    # A Codex plan's ChatGPT account (its `chatgpt-account-id`), when the platform
    # names it; else the access token's own claim is read.
    account_id: str | None = None
    # A key's remaining budget for this turn (USD; None: no cap) and its name in the
    # operator's words: the forwarder refuses the key's requests once it is spent.
    budget_usd: float | None = None
    budget_name: str | None = None

    def __repr__(self) -> str:
        return f"AppliedOverride(kind={self.kind!r}, secret=<redacted>)"


class AuthOverride(BaseModel):
    """`{oauth_token}` XOR `{api_key}`; both or neither means no override. A Codex
    plan's `oauth_token` (its access token) may come with its `account_id`; an
    `api_key` with the tightest remaining budget of the key (`budget_usd`, the agent's
    and the fleet's day and month caps net of what other turns hold) and its name."""

    oauth_token: SecretStr | None = None
    api_key: SecretStr | None = None
    account_id: str | None = Field(default=None, min_length=1, max_length=200)
    budget_usd: float | None = Field(default=None, ge=0)
    budget_name: str | None = Field(default=None, min_length=1, max_length=200)

    def applied(self) -> AppliedOverride | None:
        """Return the override to apply, or None when it is empty or ambiguous.

        Both set is ambiguous: guessing which one the caller meant could charge the
        wrong credential, so the turn runs on the agent's own credential instead.
        """
        oauth = self.oauth_token.get_secret_value() if self.oauth_token else ""
        key = self.api_key.get_secret_value() if self.api_key else ""
        if oauth and not key:
            return AppliedOverride(kind="oauth_token", secret=oauth, account_id=self.account_id)
        if key and not oauth:
            return AppliedOverride(
                kind="api_key",
                secret=key,
                budget_usd=self.budget_usd,
                budget_name=self.budget_name,
            )
        return None


class TaskRequest(BaseModel):
    execution_id: str = Field(min_length=1, max_length=200)
    message: str = Field(min_length=1)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    timeout_seconds: float = Field(gt=0, le=86_400)
    auth_override: AuthOverride | None = None
    # Answer the NDJSON stream (see the module docstring) instead of one JSON body.
    stream: bool = False


class ChatRequest(TaskRequest):
    session_id: str = Field(min_length=1, max_length=200)


class Usage(BaseModel):
    """Tokens in Anthropic's split: `input_tokens` excludes the prompt cache's."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class ModelSpend(Usage):
    cost_usd: float = 0.0


class Metered(BaseModel):
    """What the forwarder metered on the turn's grant (or the in-process runtime on its
    own requests): the turn's spend, whatever the CLI reports. `budget_refused` counts
    the requests refused because the key's budget (`budget_usd`) was reached;
    `unmetered` the served answers whose usage could not be read."""

    requests: int = 0
    cost_usd: float = 0.0
    by_model: dict[str, ModelSpend] = Field(default_factory=dict)
    budget_usd: float | None = None
    budget_refused: int = 0
    unmetered: int = 0


class TaskResponse(BaseModel):
    execution_id: str
    response: str
    model: str
    usage: Usage
    cost_usd: float | None
    # The `anthropic-ratelimit-unified-*` headers (lower-case names, values as sent)
    # of the last provider answer the forwarder relayed for this turn: a fresh
    # headroom reading of the credential the turn ran on, at no extra request. Absent
    # when no answer carried them (the direct API runtime, a turn with no credential).
    upstream_ratelimit: dict[str, str] | None = None
    # The metered spend (then `usage` and `cost_usd` are its sums, not the CLI's
    # report); absent from a server that predates metering.
    metered: Metered | None = None


class ChatResponse(TaskResponse):
    session_id: str


class ErrorBody(BaseModel):
    error_code: ErrorCode
    detail: str
    execution_id: str | None
    resets_at: datetime | None = None
    # On a rate_limit: the window the provider said limits (the unified headers'
    # representative claim, e.g. ``seven_day_sonnet``), when the runtime saw it.
    limiting_window: str | None = Field(default=None, max_length=40)
    # A turn that failed after some requests were served still spent them.
    metered: Metered | None = None


class TextEvent(BaseModel):
    """A piece of the answer's text as it is produced (a longer text is several)."""

    kind: Literal["text"] = "text"
    text: str = Field(max_length=4000)


class ToolCallEvent(BaseModel):
    """A tool call; `input` is a short summary (Bash: the command; Read, Write, Edit:
    the file path; else compact JSON), cut with "…"."""

    kind: Literal["tool_call"] = "tool_call"
    id: str = Field(max_length=100)
    name: str = Field(max_length=100)
    input: str = Field(max_length=300)


class ToolResultEvent(BaseModel):
    kind: Literal["tool_result"] = "tool_result"
    id: str = Field(max_length=100)
    ok: bool
    output: str = Field(max_length=500)


class TruncatedEvent(BaseModel):
    """The spawn's cap was reached (`dropped`: the events refused at that moment);
    no more events follow, the result line still does."""

    kind: Literal["truncated"] = "truncated"
    dropped: int = Field(ge=1)


StreamEvent = TextEvent | ToolCallEvent | ToolResultEvent | TruncatedEvent


class StreamEventLine(BaseModel):
    type: Literal["event"] = "event"
    event: StreamEvent = Field(discriminator="kind")


class StreamResultLine(BaseModel):
    type: Literal["result"] = "result"
    status: int
    body: dict[str, Any]


class CancelResponse(BaseModel):
    execution_id: str
    # Whether a turn of that id was running here (its spawn, if started, killed).
    cancelled: bool


class ReloadTokenRequest(BaseModel):
    token: SecretStr
    remove_api_key: bool = False


class ReloadTokenResponse(BaseModel):
    status: Literal["ok"] = "ok"
    reloaded: bool = True
    env_shadow: list[str]


# sandbox: the CLI runs as the agent's own OS user in its own network, PID, IPC and
# mount namespaces (agent_server/sandbox.py); separate-user: as its own OS user but
# on the host's network and process table (no sandbox here: the container, if any,
# is the boundary); same-user: as the server's own user (the weak mode).
Isolation = Literal["sandbox", "separate-user", "same-user"]


class HealthResponse(BaseModel):
    status: Literal["ok"] = "ok"
    runtime: str
    model: str | None
    busy: int
    # With ``GET /health?nonce=<hex>``: the HMAC of that nonce under the agent's secret
    # (trinity_contract/proof.py), which the platform checks before it sends anything.
    proof: str | None = Field(default=None, max_length=64)
    # How the CLI is contained (see Isolation above), and what this host lacks for
    # the full sandbox (short phrases, e.g. "not installed: bwrap ..."); empty when
    # nothing is missing.
    isolation: Isolation | None = None
    isolation_missing: list[str] = Field(default_factory=list)
    # True: the agent user's packets reach only loopback and public addresses
    # (agent_server/egress.py); the server does not serve when it was asked for and
    # could not be installed.
    egress_guard: bool = False


# Canonical example payloads. Credential values here are obviously fake on purpose.

EXAMPLE_TASK_REQUEST: Final[dict[str, Any]] = {
    "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
    "message": "Summarise the open pull requests.",
    "model": "claude-sonnet-5",
    "timeout_seconds": 600,
}

EXAMPLE_TASK_REQUEST_OAUTH_OVERRIDE: Final[dict[str, Any]] = {
    **EXAMPLE_TASK_REQUEST,
    "auth_override": {"oauth_token": "sk-ant-oat01-EXAMPLE-NOT-A-TOKEN"},
}

EXAMPLE_TASK_REQUEST_API_KEY_OVERRIDE: Final[dict[str, Any]] = {
    **EXAMPLE_TASK_REQUEST,
    "auth_override": {"api_key": "sk-ant-api03-EXAMPLE-NOT-A-KEY"},
}

EXAMPLE_CHAT_REQUEST: Final[dict[str, Any]] = {
    **EXAMPLE_TASK_REQUEST,
    "session_id": "chat-42",
}

EXAMPLE_TASK_RESPONSE: Final[dict[str, Any]] = {
    "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
    "response": "There are three open pull requests: ...",
    "model": "claude-sonnet-5",
    "usage": {
        "input_tokens": 1200,
        "output_tokens": 340,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    },
    "cost_usd": 0.0087,
}

# A turn served through the forwarder carries the provider's unified headers.
EXAMPLE_TASK_RESPONSE_WITH_RATELIMIT: Final[dict[str, Any]] = {
    **EXAMPLE_TASK_RESPONSE,
    "upstream_ratelimit": {
        "anthropic-ratelimit-unified-status": "allowed",
        "anthropic-ratelimit-unified-5h-utilization": "0.42",
        "anthropic-ratelimit-unified-5h-reset": "1777608000",
        "anthropic-ratelimit-unified-5h-status": "allowed",
        "anthropic-ratelimit-unified-7d-utilization": "0.13",
        "anthropic-ratelimit-unified-7d-reset": "1777881600",
        "anthropic-ratelimit-unified-7d-status": "allowed",
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
    },
}

# A turn through the forwarder: usage and cost are the metered sums.
EXAMPLE_TASK_RESPONSE_METERED: Final[dict[str, Any]] = {
    **EXAMPLE_TASK_RESPONSE,
    "usage": {
        "input_tokens": 1200,
        "output_tokens": 340,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 18000,
    },
    "cost_usd": 0.0141,
    "metered": {
        "requests": 2,
        "cost_usd": 0.0141,
        "by_model": {
            "claude-sonnet-5": {
                "input_tokens": 1200,
                "output_tokens": 340,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 18000,
                "cost_usd": 0.0141,
            }
        },
        "budget_usd": 4.5,
        "budget_refused": 0,
        "unmetered": 0,
    },
}

EXAMPLE_CHAT_RESPONSE: Final[dict[str, Any]] = {
    **EXAMPLE_TASK_RESPONSE,
    "session_id": "chat-42",
}

EXAMPLE_ERRORS: Final[dict[str, dict[str, Any]]] = {
    "rate_limit": {
        "error_code": "rate_limit",
        "detail": "You've hit your session limit · resets 4:10am (UTC)",
        "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
        "resets_at": "2026-05-01T04:10:00Z",
    },
    "auth": {
        "error_code": "auth",
        "detail": "Failed to authenticate. API Error: 401 OAuth token has been revoked.",
        "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
        "resets_at": None,
    },
    "model_unsupported": {
        "error_code": "model_unsupported",
        "detail": "There's an issue with the selected model (claude-nope-1). "
        "It may not exist or you may not have access to it.",
        "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
        "resets_at": None,
    },
    "container_fault": {
        "error_code": "container_fault",
        "detail": "cannot start the Claude Code CLI at /opt/claude: No such file or directory",
        "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
        "resets_at": None,
    },
    "timeout": {
        "error_code": "timeout",
        "detail": "the turn exceeded timeout_seconds=600; its process group was killed",
        "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
        "resets_at": None,
    },
    "runtime_killed": {
        "error_code": "runtime_killed",
        "detail": "the Claude Code CLI was killed by SIGKILL",
        "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
        "resets_at": None,
    },
    "billing": {
        "error_code": "billing",
        "detail": "The platform key's daily budget of $1.00 for agent 'bot' is reached: "
        "this turn's requests on the key spent $1.02 of the $1.00 it had left, so the "
        "Trinity forwarder refuses further requests on the key until the budget reopens "
        "or an admin raises it.",
        "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
        "resets_at": None,
        "metered": {
            "requests": 4,
            "cost_usd": 1.02,
            "by_model": {},
            "budget_usd": 1.0,
            "budget_refused": 1,
            "unmetered": 0,
        },
    },
    "upstream_error": {
        "error_code": "upstream_error",
        "detail": "API Error: 529 Overloaded",
        "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
        "resets_at": None,
    },
    "invalid_request": {
        "error_code": "invalid_request",
        "detail": "body.timeout_seconds: Field required",
        "execution_id": None,
        "resets_at": None,
    },
    "unauthorized": {
        "error_code": "unauthorized",
        "detail": "missing or wrong bearer secret",
        "execution_id": None,
        "resets_at": None,
    },
    "cancelled": {
        "error_code": "cancelled",
        "detail": "the turn was cancelled; its process group was killed",
        "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
        "resets_at": None,
    },
}

EXAMPLE_STREAM_LINES: Final[tuple[dict[str, Any], ...]] = (
    {"type": "event", "event": {"kind": "text", "text": "Looking at the open "}},
    {
        "type": "event",
        "event": {"kind": "tool_call", "id": "toolu_01", "name": "Bash", "input": "gh pr list"},
    },
    {
        "type": "event",
        "event": {"kind": "tool_result", "id": "toolu_01", "ok": True, "output": "#12 ..."},
    },
    {"type": "event", "event": {"kind": "truncated", "dropped": 1}},
    {"type": "result", "status": 200, "body": EXAMPLE_TASK_RESPONSE},
)

EXAMPLE_CANCEL_RESPONSE: Final[dict[str, Any]] = {
    "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
    "cancelled": True,
}

# The direct Messages-API runtime sees the provider's representative claim.
EXAMPLE_RATE_LIMIT_WITH_CLAIM: Final[dict[str, Any]] = {
    "error_code": "rate_limit",
    "detail": "API Error: 429 rate_limit_error: weekly limit reached",
    "execution_id": "3f1c2a9e-7d4b-4c1e-9a51-0c6f1e2d8b70",
    "resets_at": "2026-05-04T09:00:00Z",
    "limiting_window": "seven_day_sonnet",
}

EXAMPLE_RELOAD_TOKEN_REQUEST: Final[dict[str, Any]] = {
    "token": "sk-ant-oat01-EXAMPLE-NOT-A-TOKEN",
    "remove_api_key": True,
}

EXAMPLE_RELOAD_TOKEN_RESPONSE: Final[dict[str, Any]] = {
    "status": "ok",
    "reloaded": True,
    "env_shadow": ["ANTHROPIC_API_KEY"],
}

EXAMPLE_HEALTH_RESPONSE: Final[dict[str, Any]] = {
    "status": "ok",
    "runtime": "claude-code",
    "model": "claude-sonnet-5",
    "busy": 0,
    "isolation": "sandbox",
    "isolation_missing": [],
    "egress_guard": False,
}

EXAMPLE_HEALTH_RESPONSE_WITH_PROOF: Final[dict[str, Any]] = {
    **EXAMPLE_HEALTH_RESPONSE,
    "proof": "5c1f0e9a4b7d2c3e8f6a1b0d9c8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e",
}

# Which model validates which example; the contract test walks this table.
EXAMPLES: Final[tuple[tuple[type[BaseModel], dict[str, Any]], ...]] = (
    (TaskRequest, EXAMPLE_TASK_REQUEST),
    (TaskRequest, EXAMPLE_TASK_REQUEST_OAUTH_OVERRIDE),
    (TaskRequest, EXAMPLE_TASK_REQUEST_API_KEY_OVERRIDE),
    (ChatRequest, EXAMPLE_CHAT_REQUEST),
    (TaskResponse, EXAMPLE_TASK_RESPONSE),
    (TaskResponse, EXAMPLE_TASK_RESPONSE_WITH_RATELIMIT),
    (TaskResponse, EXAMPLE_TASK_RESPONSE_METERED),
    (ChatResponse, EXAMPLE_CHAT_RESPONSE),
    *((ErrorBody, body) for body in EXAMPLE_ERRORS.values()),
    (ErrorBody, EXAMPLE_RATE_LIMIT_WITH_CLAIM),
    (ReloadTokenRequest, EXAMPLE_RELOAD_TOKEN_REQUEST),
    (ReloadTokenResponse, EXAMPLE_RELOAD_TOKEN_RESPONSE),
    (HealthResponse, EXAMPLE_HEALTH_RESPONSE),
    (HealthResponse, EXAMPLE_HEALTH_RESPONSE_WITH_PROOF),
    *((StreamEventLine, line) for line in EXAMPLE_STREAM_LINES[:-1]),
    (StreamResultLine, EXAMPLE_STREAM_LINES[-1]),
    (CancelResponse, EXAMPLE_CANCEL_RESPONSE),
)

CONTRACT_MODELS: Final[tuple[type[BaseModel], ...]] = (
    TaskRequest,
    ChatRequest,
    TaskResponse,
    ChatResponse,
    ErrorBody,
    ReloadTokenRequest,
    ReloadTokenResponse,
    HealthResponse,
    StreamEventLine,
    StreamResultLine,
    CancelResponse,
)


def contract_schema() -> dict[str, Any]:
    """The JSON schema of every contract body, keyed by model name."""
    return {model.__name__: model.model_json_schema() for model in CONTRACT_MODELS}
