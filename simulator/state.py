"""The simulator's world: credentials, their quota windows, the clock, the request log.

Everything here is synchronous and takes ``now`` from :class:`Clock`. The FastAPI app
calls these methods from async handlers without awaiting in between, so each
check-then-consume runs to completion on the event loop and needs no lock.
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from simulator.redteam import ToolScript
from trinity_contract.prices import TokenUsage, cost_usd

CredentialKind = Literal["oauth", "api_key", "codex", "openai_key"]
AuthKind = Literal["oauth", "api_key", "codex", "openai_key", "none"]
LatencyScope = Literal["all", "usage"]
WindowStatus = Literal["allowed", "allowed_warning", "rejected"]

OAUTH_PREFIX = "sk-ant-oat"
API_KEY_PREFIX = "sk-ant-api"

FIVE_HOURS = 5 * 3600
SEVEN_DAYS = 7 * 86400

WINDOW_DURATIONS: dict[str, int] = {
    "five_hour": FIVE_HOURS,
    "seven_day": SEVEN_DAYS,
    "seven_day_sonnet": SEVEN_DAYS,
    "seven_day_opus": SEVEN_DAYS,
}
# The suffix each window carries in the anthropic-ratelimit-unified-<suffix>-* headers.
HEADER_SUFFIX: dict[str, str] = {
    "five_hour": "5h",
    "seven_day": "7d",
    "seven_day_sonnet": "7d_sonnet",
    "seven_day_opus": "7d_opus",
}
FAMILY_WINDOW: dict[str, str] = {"sonnet": "seven_day_sonnet", "opus": "seven_day_opus"}
CODEX_WINDOWS = ("five_hour", "seven_day")

# Tokens per window. Large enough for a few hundred Claude Code turns (each sends a
# system prompt of tens of kilobytes), small enough that a demo can fill one.
DEFAULT_CAPACITY: dict[str, int] = {
    "five_hour": 2_000_000,
    "seven_day": 20_000_000,
    "seven_day_sonnet": 15_000_000,
    "seven_day_opus": 10_000_000,
}
DEFAULT_CREDIT_USD = 100.0
# The fleet model's flat price per token (``charge``): it models "credit runs out", not
# the price list. A key's real requests are billed by the price list (``bill``).
COST_PER_TOKEN_USD = 0.00001
WARNING_THRESHOLD = 0.8
REQUEST_LOG_LIMIT = 50_000

DEFAULT_MODELS: tuple[str, ...] = (
    "claude-sonnet-5",
    "claude-sonnet-5-5",
    "claude-opus-5-5",
    "claude-haiku-5-5",
    "claude-sonnet-4-5",
    "claude-sonnet-4-6",
    "claude-sonnet-4-0",
    "claude-sonnet-4-20250514",
    "claude-opus-4-1",
    "claude-opus-4-5",
    "claude-opus-4-8",
    "claude-opus-4-6",
    "claude-opus-4-0",
    "claude-haiku-4-5",
    "claude-3-7-sonnet-latest",
    "claude-3-5-haiku-latest",
    "claude-3-5-haiku-20241022",
)
# The Codex models the ChatGPT backend and the platform's Responses API know.
DEFAULT_CODEX_MODELS: tuple[str, ...] = (
    "gpt-5.5-codex",
    "gpt-5.5",
    "gpt-5-codex",
    "gpt-5.1-codex",
    "gpt-5.1-codex-mini",
    "gpt-5.1-codex-max",
    "gpt-5",
)
_DATED = re.compile(r"^(?P<base>.+)-\d{8}$")


def model_family(model: str) -> str | None:
    """The family a model name belongs to (``sonnet``, ``opus``, ``haiku``) or None."""
    for family in ("opus", "sonnet", "haiku"):
        if family in model:
            return family
    return None


def token_kind(token: str) -> CredentialKind | None:
    """The kind a well-formed Anthropic token has by its prefix, else None."""
    if token.startswith(OAUTH_PREFIX):
        return "oauth"
    if token.startswith(API_KEY_PREFIX):
        return "api_key"
    return None


def default_label(token: str) -> str:
    """A label that identifies a token in reports without revealing it."""
    return "…" + token[-4:]


def iso(ts: float | None) -> str | None:
    """Unix seconds as an ISO-8601 UTC string, or None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).isoformat()


class Clock:
    """Real time plus an offset, or a frozen instant once set.

    ``advance`` moves whichever is in force, so a demo running on real time can jump
    past a reset without freezing the clock.
    """

    def __init__(self) -> None:
        self.frozen_at: float | None = None
        self.offset = 0.0

    def now(self) -> float:
        if self.frozen_at is not None:
            return self.frozen_at
        return time.time() + self.offset

    def set(self, at: float) -> None:
        self.frozen_at = at

    def advance(self, seconds: float) -> None:
        if self.frozen_at is not None:
            self.frozen_at += seconds
        else:
            self.offset += seconds

    def use_real_time(self) -> None:
        self.frozen_at = None
        self.offset = 0.0


@dataclass
class Window:
    """One quota window: starts at first use, resets at start + duration."""

    name: str
    capacity: int
    used: int = 0
    started_at: float | None = None

    @property
    def duration(self) -> int:
        return WINDOW_DURATIONS[self.name]

    def roll(self, now: float) -> None:
        """Forget usage whose window has ended: quota that reset no longer exists."""
        if self.started_at is not None and now >= self.started_at + self.duration:
            self.used = 0
            self.started_at = None

    def consume(self, tokens: int, now: float) -> None:
        if self.started_at is None:
            self.started_at = now
        self.used += tokens

    def set_used(self, tokens: int, now: float, *, resets_in: float | None = None) -> None:
        if resets_in is not None:
            # Started so that it resets ``resets_in`` from now: a week blocked for days
            # beside a 5-hour window about to roll over.
            self.started_at = now + resets_in - self.duration
        elif self.started_at is None:
            self.started_at = now
        self.used = tokens
        if tokens == 0 and resets_in is None:
            self.started_at = None

    @property
    def utilization(self) -> float:
        return self.used / self.capacity

    @property
    def exhausted(self) -> bool:
        return self.used >= self.capacity

    def resets_at(self) -> float | None:
        """When this window resets, or None while it has not started."""
        if self.started_at is None:
            return None
        return self.started_at + self.duration

    def reset_unix(self, now: float) -> int:
        """Reset instant in whole seconds, rounded up so it is never early.

        A window that has not started would start with the next request.
        """
        at = self.resets_at()
        return math.ceil(at if at is not None else now + self.duration)

    def status(self, *, served: bool) -> WindowStatus:
        # A request that was served reports at worst a warning, even when it spent
        # the last of the window: "rejected" means this very request was refused.
        if self.exhausted and not served:
            return "rejected"
        if self.utilization >= WARNING_THRESHOLD or self.exhausted:
            return "allowed_warning"
        return "allowed"


@dataclass
class Credential:
    token: str
    kind: CredentialKind
    label: str
    windows: dict[str, Window]
    credit_usd: float = DEFAULT_CREDIT_USD
    # What this key was billed in all (``Simulator.bill``): the provider's charge.
    charged_usd: float = 0.0
    revoked: bool = False
    usage_scope: bool = True
    plan_type: str = "pro"
    auto_registered: bool = False
    # The usage endpoints only: how long each answer for this credential takes (a
    # provider that hangs), and until when they answer 429 with a Retry-After (the
    # endpoint rate-limits per account).
    usage_delay_ms: int = 0
    usage_throttled_until: float | None = None
    # Reset jitter: each answer (headers or usage endpoint) shifts every reset it
    # reports by the next of these seconds, in turn, as a real provider's do by a
    # second or two between polls. Empty: exact resets.
    reset_jitter: list[int] = field(default_factory=list)
    jitter_turn: int = 0
    # A Codex (ChatGPT sign-in) credential: the account its tokens belong to, how long
    # each access token it is issued lives (None: forever), when its newest one expires,
    # and how many refreshes it was granted. The tokens live in Simulator's grants.
    account_id: str | None = None
    user_id: str | None = None
    email: str | None = None
    access_lifetime: int | None = None
    access_expires_at: float | None = None
    refreshes: int = 0

    def next_jitter(self) -> int:
        """The seconds this answer's resets are shifted by (0 without jitter)."""
        if not self.reset_jitter:
            return 0
        offset = self.reset_jitter[self.jitter_turn % len(self.reset_jitter)]
        self.jitter_turn += 1
        return offset

    def usage_retry_after(self, now: float) -> int | None:
        """Whole seconds until the usage endpoints answer again, or None if they do."""
        until = self.usage_throttled_until
        if until is None or now >= until:
            return None
        return max(1, math.ceil(until - now))

    @property
    def fingerprint(self) -> str:
        return self.token[-4:]

    def roll(self, now: float) -> None:
        for window in self.windows.values():
            window.roll(now)

    def applicable_windows(self, model: str) -> list[Window]:
        """The windows a request on ``model`` counts against, in header order."""
        names = ["five_hour", "seven_day"]
        family = model_family(model)
        if family in FAMILY_WINDOW:
            names.append(FAMILY_WINDOW[family])
        return [self.windows[n] for n in names if n in self.windows]

    def view(self, now: float) -> dict[str, object]:
        """What the control API shows: everything but the token."""
        self.roll(now)
        return {
            "label": self.label,
            "kind": self.kind,
            "fingerprint": self.fingerprint,
            "revoked": self.revoked,
            "usage_scope": self.usage_scope,
            "credit_usd": round(self.credit_usd, 6),
            "charged_usd": round(self.charged_usd, 8),
            "plan_type": self.plan_type,
            "auto_registered": self.auto_registered,
            "usage_delay_ms": self.usage_delay_ms,
            "usage_throttled_until": iso(self.usage_throttled_until),
            "reset_jitter": list(self.reset_jitter),
            "account_id": self.account_id,
            "user_id": self.user_id,
            "access_lifetime": self.access_lifetime,
            "access_expires_at": iso(self.access_expires_at),
            "refreshes": self.refreshes,
            "windows": {
                w.name: {
                    "used": w.used,
                    "capacity": w.capacity,
                    "utilization": round(w.utilization, 6),
                    "resets_at": iso(w.resets_at()),
                }
                for w in self.windows.values()
            },
        }


@dataclass
class RequestRecord:
    at: float
    request_id: str
    method: str
    path: str
    auth_kind: AuthKind
    credential: str | None
    model: str | None
    status: int
    stream: bool = False
    messages: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "at": iso(self.at),
            "request_id": self.request_id,
            "method": self.method,
            "path": self.path,
            "auth_kind": self.auth_kind,
            "credential": self.credential,
            "model": self.model,
            "status": self.status,
            "stream": self.stream,
            "messages": self.messages,
        }


@dataclass
class QuotaDecision:
    """The outcome of checking (and, when allowed, spending) an OAuth credential."""

    allowed: bool
    windows: list[Window]


@dataclass(frozen=True)
class SignIn:
    """What registering a Codex credential may set about its ChatGPT sign-in."""

    account_id: str | None = None
    refresh_token: str | None = None
    expires_in: int | None = None
    email: str | None = None
    user_id: str | None = None


@dataclass
class AccessGrant:
    """An access token issued to a Codex credential (keyed by its registration token)."""

    credential: str
    expires_at: float | None

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


@dataclass
class RefreshGrant:
    """A refresh token: single use, so ``used`` once it was exchanged; ``revoked`` by
    the control API (the provider revoked this one sign-in's refresh token)."""

    credential: str
    used: bool = False
    revoked: bool = False


@dataclass
class AuthCode:
    """An authorization code a sign-in page issued: single use, short-lived, bound to
    the client, redirect URI, PKCE challenge and state it was asked with."""

    client_id: str
    redirect_uri: str
    challenge: str
    state: str
    expires_at: float
    used: bool = False


@dataclass
class DeviceAuth:
    """A device-code sign-in (the Codex CLI's ``--device-auth``): a user code the person
    types on the device page, pending until they approve it there; then an
    authorization code and its PKCE verifier the polling client fetches and redeems
    with ``redirect_uri``."""

    user_code: str
    redirect_uri: str
    expires_at: float
    code: str | None = None  # set on approval
    verifier: str | None = None
    denied: bool = False


class RefreshRefused(Exception):
    """A refresh the sign-in service refuses; ``code`` is what the CLI classifies."""

    def __init__(self, code: str, credential: Credential | None) -> None:
        super().__init__(code)
        self.code = code
        self.credential = credential


@dataclass
class Simulator:
    clock: Clock = field(default_factory=Clock)
    credentials: dict[str, Credential] = field(default_factory=dict)
    models: set[str] = field(default_factory=lambda: set(DEFAULT_MODELS))
    requests: deque[RequestRecord] = field(default_factory=lambda: deque(maxlen=REQUEST_LOG_LIMIT))
    latency_all_ms: int = 0
    latency_usage_ms: int = 0
    # A pause between the events of every streamed answer (a slow model), and how many
    # streams the client left before their last event (their generator was closed).
    stream_pause_ms: int = 0
    streams_cut: int = 0
    # A provider-side outage: while set, the Messages API answers this 5xx to every
    # credential (0: none). ``upstream_error_retryable`` is its ``x-should-retry``.
    upstream_error_status: int = 0
    upstream_error_retryable: bool = True
    # The armed scripted tool-using model (simulator/redteam.py), or None.
    red_team: ToolScript | None = None
    codex_models: set[str] = field(default_factory=lambda: set(DEFAULT_CODEX_MODELS))
    # Codex sign-in tokens by value. A credential keeps its registration token as its
    # key for life; rotation adds grants that point at that key.
    access_grants: dict[str, AccessGrant] = field(default_factory=dict)
    refresh_grants: dict[str, RefreshGrant] = field(default_factory=dict)
    # The sign-in pages' authorization codes (simulator/oauth.py), by value.
    auth_codes: dict[str, AuthCode] = field(default_factory=dict)
    # Device-code sign-ins (simulator/device_auth.py), by device_auth_id.
    device_auths: dict[str, DeviceAuth] = field(default_factory=dict)
    sign_ins: int = 0

    def reset(self) -> None:
        """Back to a fresh start: no credentials, default models, real time, no latency,
        no outage."""
        self.clock.use_real_time()
        self.credentials.clear()
        self.models = set(DEFAULT_MODELS)
        self.requests.clear()
        self.latency_all_ms = 0
        self.latency_usage_ms = 0
        self.stream_pause_ms = 0
        self.streams_cut = 0
        self.upstream_error_status = 0
        self.upstream_error_retryable = True
        self.red_team = None
        self.codex_models = set(DEFAULT_CODEX_MODELS)
        self.access_grants.clear()
        self.refresh_grants.clear()
        self.auth_codes.clear()
        self.device_auths.clear()
        self.sign_ins = 0

    # credentials

    def register(
        self,
        *,
        token: str,
        kind: CredentialKind,
        label: str | None = None,
        capacity: dict[str, int] | None = None,
        credit_usd: float | None = None,
        usage_scope: bool | None = None,
        plan_type: str | None = None,
        auto_registered: bool = False,
        usage_delay_ms: int | None = None,
        sign_in: SignIn | None = None,
    ) -> Credential:
        """Create a credential, or update the given fields of an existing one.

        ``sign_in`` (a Codex or Claude plan's) sets the account, refresh token and
        access-token lifetime. Raises ValueError on an unknown window name, a capacity
        below 1, or a sign-in for a key.
        """
        names: tuple[str, ...] = tuple(WINDOW_DURATIONS)
        if kind == "codex":
            names = CODEX_WINDOWS
        elif kind in ("api_key", "openai_key"):
            names = ()  # a key pays per token; it has no plan windows
        if sign_in is not None and kind not in ("codex", "oauth"):
            raise ValueError("only a plan (codex, oauth) has a sign-in")
        for name, value in (capacity or {}).items():
            if name not in names:
                raise ValueError(f"unknown window for {kind}: {name}")
            if value < 1:
                raise ValueError(f"capacity must be at least 1: {name}")
        cred = self.credentials.get(token)
        if cred is None or cred.kind != kind:
            cred = Credential(
                token=token,
                kind=kind,
                label=label or default_label(token),
                windows={n: Window(name=n, capacity=DEFAULT_CAPACITY[n]) for n in names},
                auto_registered=auto_registered,
            )
            self.credentials[token] = cred
        elif label:
            cred.label = label
        for name, value in (capacity or {}).items():
            cred.windows[name].capacity = value
        if credit_usd is not None:
            cred.credit_usd = credit_usd
        if usage_scope is not None:
            cred.usage_scope = usage_scope
        if plan_type is not None:
            cred.plan_type = plan_type
        if usage_delay_ms is not None:
            cred.usage_delay_ms = usage_delay_ms
        if kind == "codex" or sign_in is not None:
            self._sign_in(cred, sign_in or SignIn(), fresh=token not in self.access_grants)
        return cred

    def _sign_in(self, cred: Credential, sign_in: SignIn, *, fresh: bool) -> None:
        """Set a Codex credential's sign-in; its registration token is its first access
        token, valid for ``expires_in`` seconds from now (forever when None)."""
        now = self.clock.now()
        if sign_in.account_id is not None or cred.account_id is None:
            cred.account_id = sign_in.account_id or "acct-sim-" + cred.fingerprint
        if sign_in.user_id is not None or cred.user_id is None:
            cred.user_id = sign_in.user_id or "user-sim-" + cred.fingerprint
        if sign_in.email is not None:
            cred.email = sign_in.email
        if fresh or sign_in.expires_in is not None:
            cred.access_lifetime = sign_in.expires_in
            expires_at = now + sign_in.expires_in if sign_in.expires_in is not None else None
            cred.access_expires_at = expires_at
            self.access_grants[cred.token] = AccessGrant(cred.token, expires_at)
        if sign_in.refresh_token is not None:
            self.refresh_grants[sign_in.refresh_token] = RefreshGrant(cred.token)

    def lookup(self, token: str) -> Credential:
        """The registered credential for ``token`` (or for a Codex access token it was
        issued); raises KeyError if none."""
        cred = self.credentials.get(token)
        if cred is None:
            cred = self.credentials[self.access_grants[token].credential]
        return cred

    # Codex sign-in

    def codex_access(self, token: str) -> tuple[Credential, AccessGrant] | None:
        """The Codex credential an access token was issued to, with its grant."""
        grant = self.access_grants.get(token)
        cred = self.credentials.get(grant.credential) if grant else None
        if grant is None or cred is None or cred.kind != "codex":
            return None
        return cred, grant

    def expire_access(self, cred: Credential) -> None:
        """Every access token issued to ``cred`` expires now (refresh tokens stand)."""
        now = self.clock.now()
        for grant in self.access_grants.values():
            if grant.credential == cred.token:
                grant.expires_at = now
        cred.access_expires_at = now

    def rotate(
        self,
        refresh_token: str,
        *,
        mint_access: Callable[[Credential, float | None], str],
        new_refresh: str,
    ) -> tuple[Credential, str]:
        """Exchange a refresh token: returns the credential and a new access token
        (``mint_access(credential, expires_at)``); ``new_refresh`` is issued to the same
        credential and the presented token is spent. Earlier access tokens keep
        working until their own expiry, as stateless bearer tokens do.

        Raises RefreshRefused: ``refresh_token_expired`` (unknown),
        ``refresh_token_invalidated`` (the sign-in is revoked), ``refresh_token_reused``
        (spent before: the whole sign-in is revoked, as a provider that detects a
        replayed refresh token does).
        """
        grant = self.refresh_grants.get(refresh_token)
        cred = self.credentials.get(grant.credential) if grant else None
        if grant is None or cred is None:
            raise RefreshRefused("refresh_token_expired", None)
        if cred.revoked or grant.revoked:
            raise RefreshRefused("refresh_token_invalidated", cred)
        if grant.used:
            cred.revoked = True
            raise RefreshRefused("refresh_token_reused", cred)
        grant.used = True
        now = self.clock.now()
        lifetime = cred.access_lifetime
        expires_at = now + lifetime if lifetime is not None else None
        access_token = mint_access(cred, expires_at)
        self.access_grants[access_token] = AccessGrant(cred.token, expires_at)
        self.refresh_grants[new_refresh] = RefreshGrant(cred.token)
        cred.access_expires_at = expires_at
        cred.refreshes += 1
        return cred, access_token

    def is_known_codex_model(self, model: str) -> bool:
        return model in self.codex_models

    def resolve(self, token: str, *, auto_kind: CredentialKind | None) -> Credential | None:
        """The credential for ``token`` (or for an access token its sign-in was issued),
        auto-registering it as ``auto_kind`` if unknown."""
        cred = self.credentials.get(token)
        if cred is None and token in self.access_grants:
            cred = self.credentials.get(self.access_grants[token].credential)
        if cred is None and auto_kind is not None:
            cred = self.register(token=token, kind=auto_kind, auto_registered=True)
        return cred

    def set_usage(
        self,
        token: str,
        window: str,
        *,
        percent: float | None,
        tokens: int | None,
        resets_in: float | None = None,
    ) -> Credential:
        """Fill ``window`` to ``percent`` of capacity (above 100 overdraws it) or to
        ``tokens`` used; with ``resets_in`` the window resets that many seconds from now.

        Starts the window now if it had not started. Raises KeyError / ValueError.
        """
        cred = self.lookup(token)
        if window not in cred.windows:
            raise ValueError(f"unknown window for {cred.kind}: {window}")
        now = self.clock.now()
        cred.roll(now)
        w = cred.windows[window]
        if tokens is None:
            if percent is None:
                raise ValueError("give percent or tokens")
            tokens = math.ceil(w.capacity * percent / 100)
        if resets_in is not None and not 0 < resets_in <= w.duration:
            raise ValueError(f"resets_in must be within the window's {w.duration} s")
        w.set_used(tokens, now, resets_in=resets_in)
        return cred

    # the Messages API

    def is_known_model(self, model: str) -> bool:
        if model in self.models:
            return True
        dated = _DATED.match(model)
        return bool(dated and dated.group("base") in self.models)

    def check_quota(self, cred: Credential, model: str) -> QuotaDecision:
        """Whether ``cred`` may serve a request on ``model`` now; spends nothing."""
        cred.roll(self.clock.now())
        windows = cred.applicable_windows(model)
        return QuotaDecision(allowed=not any(w.exhausted for w in windows), windows=windows)

    def spend(self, cred: Credential, model: str, tokens: int) -> None:
        """Count a served request's tokens against every window it applies to."""
        now = self.clock.now()
        for window in cred.applicable_windows(model):
            window.consume(tokens, now)

    def charge(self, cred: Credential, tokens: int) -> None:
        """Charge ``tokens`` at the flat fleet-model price (bench/fleet only)."""
        cred.credit_usd -= tokens * COST_PER_TOKEN_USD
        cred.charged_usd += tokens * COST_PER_TOKEN_USD

    def bill(self, cred: Credential, *, provider: str, model: str, usage: TokenUsage) -> float:
        """Bill a key for one served answer's ``usage`` on ``model`` at the provider's
        prices (``trinity_contract/prices.py``, the table the platform meters by);
        returns the charge."""
        charge = cost_usd(provider, model, usage)
        cred.credit_usd -= charge
        cred.charged_usd += charge
        return charge

    def record(self, record: RequestRecord) -> None:
        self.requests.append(record)
