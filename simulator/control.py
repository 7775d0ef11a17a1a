"""A typed client for the simulator's ``/_control/`` API (tests, bench, demo)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypedDict, cast

import httpx

from simulator.state import CredentialKind, LatencyScope

WindowName = Literal["five_hour", "seven_day", "seven_day_sonnet", "seven_day_opus"]


class WindowView(TypedDict):
    used: int
    capacity: int
    utilization: float
    resets_at: str | None


class CredentialView(TypedDict):
    label: str
    kind: CredentialKind
    fingerprint: str
    revoked: bool
    usage_scope: bool
    credit_usd: float
    charged_usd: float
    plan_type: str
    auto_registered: bool
    usage_delay_ms: int
    usage_throttled_until: str | None
    reset_jitter: list[int]
    account_id: str | None  # a sign-in's: the ChatGPT account its tokens belong to
    user_id: str | None  # a sign-in's: the chatgpt_user_id its id tokens carry
    access_lifetime: int | None  # a sign-in's: seconds each access token lives (None: ever)
    access_expires_at: str | None  # a sign-in's: when the newest access token expires
    refreshes: int  # a sign-in's refreshes granted (rotations), Codex or Claude
    windows: dict[str, WindowView]


class RequestRecord(TypedDict):
    at: str
    request_id: str
    method: str
    path: str
    auth_kind: Literal["oauth", "api_key", "codex", "openai_key", "none"]
    credential: str | None
    model: str | None
    status: int
    stream: bool
    messages: int


class ClockView(TypedDict):
    now: str
    unix: float
    frozen: bool


class LatencyView(TypedDict):
    all_ms: int
    usage_ms: int
    in_flight: int  # API requests not yet answered (a held one included)


class ToolResultView(TypedDict):
    tool: str | None
    input: dict[str, Any] | None
    is_error: bool
    content: str


class RedTeamView(TypedDict):
    trigger: str
    reads: list[str]
    commands: list[str]
    tool_calls: int
    results: list[ToolResultView]
    answers: int
    cwd: str | None  # the working directory the CLI named in its prompt


class OAuthView(TypedDict):
    sign_ins: int  # plans signed in at the authorize page and token endpoints
    codes_issued: int
    codes_redeemed: int  # codes presented (each is spent by its first presentation)
    refreshes: int  # refresh tokens rotated, every credential's
    device_auths: int  # device-code sign-ins asked for (simulator/device_auth.py)
    device_auths_approved: int  # of them, approved on the device page


class UpstreamErrorView(TypedDict):
    status: int
    retryable: bool


class SimulatorControl:
    """Drives one simulator. Every call is bounded by ``timeout`` seconds and raises
    ``httpx.HTTPStatusError`` on a non-2xx answer."""

    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url + "/_control", timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SimulatorControl:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, method: str, path: str, json: Any = None, **params: Any) -> Any:
        response = self._http.request(method, path, json=json, params=params or None)
        response.raise_for_status()
        return response.json()

    # health and reset

    def health(self) -> bool:
        return bool(self._call("GET", "/health")["ok"])

    def reset(self) -> None:
        """Forget every credential and request, restore the default models, real
        time, zero latency and no outage."""
        self._call("POST", "/reset")

    # credentials

    def register(
        self,
        token: str,
        *,
        kind: CredentialKind,
        label: str | None = None,
        capacity: dict[str, int] | None = None,
        credit_usd: float | None = None,
        usage_scope: bool | None = None,
        plan_type: str | None = None,
        usage_delay_ms: int | None = None,
        account_id: str | None = None,
        refresh_token: str | None = None,
        expires_in: int | None = None,
        email: str | None = None,
        user_id: str | None = None,
    ) -> CredentialView:
        """Create the credential, or update the given fields if ``token`` exists.

        ``capacity`` maps window names to tokens per window; unnamed windows keep
        their defaults. Codex credentials have ``five_hour`` and ``seven_day`` only.
        ``usage_delay_ms`` delays every usage-endpoint answer for this credential
        (on top of the global latency): a provider that hangs for one account.

        A Codex credential is a ChatGPT sign-in: ``token`` is its first access token,
        valid ``expires_in`` seconds (omitted: forever), for ``account_id`` (default
        ``acct-sim-<last 4>``: the ``chatgpt-account-id`` the CLI must send), and
        ``refresh_token`` exchanges once at ``/oauth/token``; the id tokens a refresh
        issues carry ``email`` and ``user_id`` (default ``user-sim-<last 4>``), which
        the CLI requires to equal the ones it signed in with. The control API keeps
        addressing it by ``token`` (or any access token it was issued) after rotation.
        ``kind="openai_key"`` is a platform key for ``/v1/responses`` with ``credit_usd``.
        """
        body: dict[str, Any] = {"token": token, "kind": kind}
        for name, value in (
            ("label", label),
            ("capacity", capacity),
            ("credit_usd", credit_usd),
            ("usage_scope", usage_scope),
            ("plan_type", plan_type),
            ("usage_delay_ms", usage_delay_ms),
            ("account_id", account_id),
            ("refresh_token", refresh_token),
            ("expires_in", expires_in),
            ("email", email),
            ("user_id", user_id),
        ):
            if value is not None:
                body[name] = value
        return cast(CredentialView, self._call("POST", "/credentials", body))

    def credentials(self) -> list[CredentialView]:
        return cast(list[CredentialView], self._call("GET", "/credentials"))

    def credential(self, label: str) -> CredentialView:
        """The credential with ``label``; raises LookupError unless exactly one."""
        found = cast(list[CredentialView], self._call("GET", "/credentials", label=label))
        if len(found) != 1:
            raise LookupError(f"{len(found)} credentials labelled {label!r}")
        return found[0]

    def set_usage(
        self,
        token: str,
        window: WindowName,
        *,
        percent: float | None = None,
        tokens: int | None = None,
        resets_in: float | None = None,
    ) -> CredentialView:
        """Fill ``window`` to ``percent`` of its capacity (above 100 overdraws it), or to
        ``tokens`` used. A window that had not started starts now; with ``resets_in``
        it resets that many seconds from now."""
        body = {
            "token": token,
            "window": window,
            "percent": percent,
            "tokens": tokens,
            "resets_in": resets_in,
        }
        return cast(CredentialView, self._call("POST", "/credentials/usage", body))

    def set_reset_jitter(self, token: str, offsets: list[int]) -> CredentialView:
        """Shift the resets each answer for ``token`` reports by the next of ``offsets``
        seconds, in turn (``[]`` lifts it)."""
        body = {"token": token, "offsets": offsets}
        return cast(CredentialView, self._call("POST", "/credentials/reset-jitter", body))

    def revoke(self, token: str, *, revoked: bool = True) -> CredentialView:
        body = {"token": token, "revoked": revoked}
        return cast(CredentialView, self._call("POST", "/credentials/revoke", body))

    def expire_access(self, token: str) -> CredentialView:
        """Every access token the Codex credential was issued expires now; its refresh
        token still exchanges."""
        body = {"token": token}
        return cast(CredentialView, self._call("POST", "/credentials/expire-access", body))

    def throttle_usage(self, token: str, *, seconds: float) -> CredentialView:
        """Make the usage endpoints answer 429 with a Retry-After for ``token`` for
        ``seconds`` of simulator time (0 lifts it)."""
        body = {"token": token, "seconds": seconds}
        return cast(CredentialView, self._call("POST", "/credentials/usage-throttle", body))

    def add_credit(self, token: str, usd: float) -> CredentialView:
        body = {"token": token, "add_usd": usd}
        return cast(CredentialView, self._call("POST", "/credentials/credit", body))

    def set_usage_scope(self, token: str, *, allowed: bool) -> CredentialView:
        """With ``allowed=False`` the OAuth usage endpoint answers 403 for ``token``."""
        body = {"token": token, "allowed": allowed}
        return cast(CredentialView, self._call("POST", "/credentials/usage-scope", body))

    # the sign-in (simulator/oauth.py)

    def oauth(self) -> OAuthView:
        return cast(OAuthView, self._call("GET", "/oauth"))

    def revoke_refresh(self, refresh_token: str) -> None:
        """The provider revokes this refresh token: presenting it is refused
        (``refresh_token_invalidated``; Claude's endpoint says ``invalid_grant``)."""
        self._call("POST", "/oauth/revoke-refresh", {"refresh_token": refresh_token})

    # clock

    def clock(self) -> ClockView:
        return cast(ClockView, self._call("GET", "/clock"))

    def now(self) -> datetime:
        return datetime.fromisoformat(self.clock()["now"])

    def set_clock(self, at: datetime | float) -> ClockView:
        """Freeze the clock at ``at`` (an aware datetime or unix seconds)."""
        value = at.isoformat() if isinstance(at, datetime) else at
        return cast(ClockView, self._call("POST", "/clock/set", {"at": value}))

    def advance_clock(self, seconds: float) -> ClockView:
        return cast(ClockView, self._call("POST", "/clock/advance", {"seconds": seconds}))

    def use_real_clock(self) -> ClockView:
        return cast(ClockView, self._call("POST", "/clock/real"))

    # request log

    def requests(self) -> list[RequestRecord]:
        return cast(list[RequestRecord], self._call("GET", "/requests"))

    def clear_requests(self) -> None:
        self._call("DELETE", "/requests")

    # latency and models

    def latency(self) -> LatencyView:
        return cast(LatencyView, self._call("GET", "/latency"))

    def set_latency(self, ms: int, *, scope: LatencyScope = "all") -> LatencyView:
        """Delay every API answer (``all``) or, on top of that, the usage endpoints.

        A change releases every answer the previous latency was holding."""
        return cast(LatencyView, self._call("POST", "/latency", {"ms": ms, "scope": scope}))

    def set_stream_pause(self, ms: int) -> dict[str, int]:
        """Pause ``ms`` between the events of every streamed answer (a slow model)."""
        return cast(dict[str, int], self._call("POST", "/stream-pause", {"ms": ms}))

    def streams_cut(self) -> int:
        """How many streams their client left before the last event."""
        return int(self._call("GET", "/stream-pause")["cut"])

    def set_upstream_error(self, status: int, *, retryable: bool = True) -> UpstreamErrorView:
        """Answer every Messages request with ``status`` (500, 502, 503, 504 or 529) for
        every credential, with ``x-should-retry`` set from ``retryable``; 0 lifts it."""
        body = {"status": status, "retryable": retryable}
        return cast(UpstreamErrorView, self._call("POST", "/upstream-error", body))

    # the scripted tool-using model (simulator/redteam.py)

    def arm_red_team(
        self, *, trigger: str, reads: Sequence[str], commands: Sequence[str] = ()
    ) -> RedTeamView:
        """Answer requests whose prompt carries ``trigger`` with Read calls on ``reads``
        and Bash calls running ``commands``; then quote what the tools returned."""
        body = {"trigger": trigger, "reads": list(reads), "commands": list(commands)}
        return cast(RedTeamView, self._call("POST", "/red-team", body))

    def red_team(self) -> RedTeamView:
        """The armed script: its calls and every tool result the CLI sent back."""
        return cast(RedTeamView, self._call("GET", "/red-team"))

    def disarm_red_team(self) -> None:
        self._call("DELETE", "/red-team")

    def models(self) -> list[str]:
        return cast(list[str], self._call("GET", "/models"))

    def add_model(self, name: str) -> list[str]:
        return cast(list[str], self._call("POST", "/models", {"name": name}))

    def codex_models(self) -> list[str]:
        """The models the Responses endpoints (plan and platform) know."""
        return cast(list[str], self._call("GET", "/codex-models"))

    def add_codex_model(self, name: str) -> list[str]:
        return cast(list[str], self._call("POST", "/codex-models", {"name": name}))
