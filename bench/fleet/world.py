"""The provider side of the simulation: the simulator's own classes, in process.

Quotas are ``simulator.state``'s: a ``Simulator`` holds one OAuth ``Credential`` per
subscription with its 5h, 7d and model-family weekly ``Window``s and one API-key
credential; a request is checked and spent with ``Simulator.check_quota`` /
``Simulator.spend`` on the simulated ``Clock``, and a refusal carries the headers
``simulator.ratelimit.unified_headers`` builds. What the agent server makes of a
refusal is ``agent_server.classifier``'s (the same code its Messages API runtime
calls), so a turn outcome here is the ``TurnOutcome`` the dispatch loop would get.
Readings come from the real collector (``collectors.anthropic.parse_usage_body``)
over the body the simulator's usage endpoint serves.

One difference from the simulator, on purpose: its windows start at the first
request after a reset; here each window is anchored to its phase (``PhasedWindow``):
the next window starts at the reset instant. That makes every reset instant a
property of the trace, not of the policy, which is what lets one LP bound every
policy (docs/benchmarks.md). ``World(fleet, phased=False)`` runs the simulator's own
rule instead (``SimulatorWindow``: a plain ``Window`` that only records its resets),
so the difference between the two rules can be measured (``report.rule_gap``).

A plan is sent to only while it is present (``SubscriptionSpec.present``: added and
not removed): ``attempt`` asserts it, since no policy may choose an absent plan.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from agent_server.classifier import classify_runtime_refusal, parse_unified_reset
from agents.client import TurnOutcome
from bench.fleet.cache import PromptCache
from bench.fleet.trace import Fleet, Request, SubscriptionSpec
from routing.headroom.reading import Reading, ReadingStatus
from routing.rung import Rung, RungKind
from simulator.app import OAUTH_REVOKED, RATE_LIMITED
from simulator.ratelimit import PREFIX, unified_headers
from simulator.state import Credential, Simulator, Window, iso
from subscriptions.headroom.collectors.anthropic import parse_usage_body
from trinity.crypto import Secret

KEY_TOKEN = "sk-ant-api03-fleet-bench-platform-key"  # noqa: S105 - a simulated key
# The simulator's usage endpoint lists these windows, in this order.
USAGE_WINDOWS = ("five_hour", "seven_day", "seven_day_sonnet", "seven_day_opus")


def to_unix(at: datetime) -> float:
    return at.timestamp()


def from_unix(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@dataclass(frozen=True)
class ResetRecord:
    """One window reset: its capacity and what the window that ended had used.

    ``revoked``: the plan could not be used for that window (revoked before the
    reset, removed before it, or not added until after it), so its capacity counts
    as neither used nor unused.
    """

    at: float
    subscription: str
    window: str
    capacity: int
    used: int
    revoked: bool = False

    @property
    def unused(self) -> int:
        return 0 if self.revoked else max(0, self.capacity - self.used)


@dataclass
class PhasedWindow(Window):
    """A ``simulator.state.Window`` whose next window starts at its reset instant.

    ``started_at`` is never None: the first window is given by the trace's phase, and
    ``roll`` moves it forward by whole window lengths, recording each reset with what
    the ending window used (a window nobody touched resets with nothing used).
    """

    owner: str = ""
    resets: list[ResetRecord] = field(default_factory=list)
    usable: tuple[float, float] = (-math.inf, math.inf)  # present, and not revoked
    # The reset instant of the window in force (``started_at`` + its duration): every
    # quota check rolls every window, so the common case must be one comparison.
    ends: float = -math.inf

    def roll(self, now: float) -> None:
        if now < self.ends:
            return
        start = self.started_at
        assert start is not None  # anchored windows always have a start
        duration = self.duration
        while now >= start + duration:
            start += duration
            self.resets.append(_reset(self, start))
            self.used = 0
        self.started_at = start
        self.ends = start + duration


@dataclass
class SimulatorWindow(Window):
    """A plain ``simulator.state.Window`` (the next window starts at the first request
    after a reset) that records each reset the way ``PhasedWindow`` does."""

    owner: str = ""
    resets: list[ResetRecord] = field(default_factory=list)
    usable: tuple[float, float] = (-math.inf, math.inf)

    def roll(self, now: float) -> None:
        at = self.resets_at()
        if at is not None and now >= at:
            self.resets.append(_reset(self, at))
        super().roll(now)


def _reset(window: PhasedWindow | SimulatorWindow, at: float) -> ResetRecord:
    """The reset at ``at`` of the window that ends there, with what it used."""
    begins, ends = window.usable
    unusable = at <= begins or ends <= at
    return ResetRecord(at, window.owner, window.name, window.capacity, window.used, unusable)


@dataclass(frozen=True)
class Subscription:
    """A simulated subscription: its id (1-based, fleet order), name, credential, rung."""

    id: int
    name: str
    credential: Credential
    rung: Rung


class World:
    """The provider simulator for one policy's run: fresh quotas, one clock.

    ``phased``: windows anchored to their phase (the benchmark's rule), else the
    simulator's own (a window starts at the first request after a reset).
    """

    def __init__(self, fleet: Fleet, *, phased: bool = True) -> None:
        self.fleet = fleet
        self.phased = phased
        self.sim = Simulator()
        self.sim.clock.set(to_unix(fleet.start))
        self.subscriptions: dict[int, Subscription] = {}
        self.by_name: dict[str, Subscription] = {}
        # No plan is ever added or removed: every plan is always present.
        self.fixed = all(s.added_at is None and s.removed_at is None for s in fleet.subscriptions)
        for index, spec in enumerate(fleet.subscriptions, start=1):
            token = f"sk-ant-oat01-fleet-bench-{index:03d}"
            credential = self.sim.register(
                token=token,
                kind="oauth",
                label=spec.name,
                plan_type=spec.plan_type,
                capacity={name: w.capacity for name, w in spec.windows.items()},
            )
            credential.windows = dict(self._windows(spec, phased=phased))
            subscription = Subscription(
                index,
                spec.name,
                credential,
                Rung(RungKind.SUBSCRIPTION, Secret(token), index, spec.name),
            )
            self.subscriptions[index] = subscription
            self.by_name[spec.name] = subscription
        self.key = self.sim.register(token=KEY_TOKEN, kind="api_key", credit_usd=float("inf"))
        self.key_rung = Rung(RungKind.API_KEY, Secret(KEY_TOKEN))
        self.cache = PromptCache()
        # What the key has billed so far ($), each request warm or cold as it was.
        self.key_usd = 0.0
        # Whether the last attempt's prefix was warm where it went (a cache read), as
        # ``attempt`` decided it: what the engine bills and counts that request at.
        self.last_warm = True

    @staticmethod
    def _windows(
        spec: SubscriptionSpec, *, phased: bool
    ) -> Iterator[tuple[str, PhasedWindow | SimulatorWindow]]:
        begins, ends = _span(spec.added_at, spec.removed_at)
        if spec.revoked_at is not None:
            ends = min(ends, to_unix(spec.revoked_at))
        kind = PhasedWindow if phased else SimulatorWindow
        for name, window in spec.windows.items():
            made = kind(name=name, capacity=window.capacity, owner=spec.name)
            made.usable = (begins, ends)
            made.used = window.used
            # The simulator's rule: a window nobody has used has not started yet.
            if phased or window.used:
                made.started_at = to_unix(window.first_reset) - made.duration
            yield name, made

    def present(self, subscription_id: int, at: datetime) -> bool:
        """Whether the plan is registered at ``at`` (a candidate for any policy)."""
        return self.fixed or self.fleet.subscriptions[subscription_id - 1].present(at)

    def paused(self, subscription_id: int, at: datetime) -> bool:
        """Whether an admin has the plan paused at ``at``: no turn may start on it or
        walk to it (one already running on it finishes there)."""
        return self.fleet.subscriptions[subscription_id - 1].paused_at(at)

    def present_ids(self, at: datetime) -> list[int]:
        """The plans registered at ``at``, in fleet order."""
        if self.fixed:
            return list(self.subscriptions)
        return [pk for pk in self.subscriptions if self.present(pk, at)]

    def now(self, at: datetime) -> float:
        seconds = to_unix(at)
        self.sim.clock.set(seconds)
        return seconds

    def revoke(self, subscription: str, at: datetime) -> None:
        self.now(at)
        self.by_name[subscription].credential.revoked = True

    # A turn attempt, as the agent server reports it

    def attempt(
        self,
        rung: Rung,
        *,
        model: str,
        tokens: int,
        at: datetime,
        cached: int = 0,
        session: str | None = None,
    ) -> TurnOutcome:
        """Run one attempt of ``tokens`` fresh and ``cached`` prefix tokens on ``rung``;
        a served one spends them. With a ``session`` (the agent), the prefix is a cache
        read where the session's cache is warm on ``rung`` and a write otherwise
        (``cache.PromptCache``): the plan's windows count it at the trace's weight, the
        key bills it at the read or write multiplier (``World.key_usd``). Sets
        ``last_warm`` to which of the two it was."""
        now = self.now(at)
        place = rung.subscription_id if rung.kind is RungKind.SUBSCRIPTION else None
        request = Request(0.0, tokens, cached)
        warm = self.last_warm = self.cache.warm(session, place, now)
        if rung.kind is RungKind.API_KEY:
            self.sim.charge(self.key, tokens)
            self.key_usd += self.fleet.key_usd(model, request, warm=warm)
            self.cache.used(session, place, now, cached)
            return _served(model, tokens, rung)
        assert rung.subscription_id is not None
        # Nobody may send to a plan that is not registered: the world refuses
        # nothing for it, a policy that tried is wrong.
        assert self.present(rung.subscription_id, at), f"sent to absent {rung.name} at {at}"
        credential = self.subscriptions[rung.subscription_id].credential
        if credential.revoked:
            return _refused(401, f"authentication_error: {OAUTH_REVOKED}", None, at, rung)
        decision = self.sim.check_quota(credential, model)
        if not decision.allowed:
            headers = unified_headers(decision.windows, served=False, now=now)
            reset = parse_unified_reset(headers.get(PREFIX + "reset"))
            claim = headers.get(PREFIX + "representative-claim", "")
            return _refused(429, f"rate_limit_error: {RATE_LIMITED}", reset, at, rung, claim)
        self.sim.spend(credential, model, self.fleet.counted(request, warm=warm))
        self.cache.used(session, place, now, cached)
        return _served(model, tokens, rung)

    def withdrawn(self, rung: Rung, at: datetime) -> TurnOutcome:
        """What a turn meets on a plan the operator removed while it ran, or one an
        admin paused that it is about to start on: an auth refusal, and nothing reaches
        the provider."""
        return _refused(401, f"authentication_error: {OAUTH_REVOKED}", None, at, rung)

    def could_serve(self, model: str, at: datetime) -> bool:
        """Whether any present subscription would serve a request on ``model`` now
        (nothing spent)."""
        self.now(at)
        return any(
            not s.credential.revoked
            and self.present(pk, at)
            and not self.paused(pk, at)
            and self.sim.check_quota(s.credential, model).allowed
            for pk, s in self.subscriptions.items()
        )

    # What the headroom sampler would read

    def usage_body(self, subscription_id: int, at: datetime) -> dict[str, object] | None:
        """The body of the simulator's ``GET /api/oauth/usage`` for this credential
        (``simulator/app.py``), or None where it answers 401 (a revoked token)."""
        now = self.now(at)
        credential = self.subscriptions[subscription_id].credential
        if credential.revoked:
            return None
        credential.roll(now)
        body: dict[str, object] = {}
        for name in USAGE_WINDOWS:
            window = credential.windows.get(name)
            body[name] = (
                None
                if window is None
                else {
                    "utilization": round(window.utilization * 100, 2),
                    "resets_at": iso(window.resets_at()),
                }
            )
        body["seven_day_oauth_apps"] = None
        body["extra_usage"] = {
            "is_enabled": False,
            "monthly_limit": None,
            "used_credits": None,
            "utilization": None,
        }
        return body

    def reading(self, subscription_id: int, at: datetime) -> Reading:
        """The reading the Anthropic collector makes of the usage endpoint's answer."""
        body = self.usage_body(subscription_id, at)
        if body is None:
            # collectors.anthropic.read: a 401 is final, the token is refused.
            return Reading(
                fetched_at=at, status=ReadingStatus.INVALID_TOKEN, source="usage", detail="HTTP 401"
            )
        reading = parse_usage_body(body, now=at)
        assert reading is not None  # the simulator's body is the known shape
        return reading

    # Accounting

    def flush(self, at: datetime) -> None:
        """Roll every window to ``at`` so each reset before it is recorded."""
        now = self.now(at)
        for subscription in self.subscriptions.values():
            subscription.credential.roll(now)

    def utilization(self, at: datetime) -> dict[str, dict[str, float]]:
        """Per subscription, each window's utilization (0..1+) at ``at``."""
        now = self.now(at)
        out: dict[str, dict[str, float]] = {}
        for subscription in self.subscriptions.values():
            subscription.credential.roll(now)
            out[subscription.name] = {
                name: window.utilization for name, window in subscription.credential.windows.items()
            }
        return out

    def resets(self) -> list[ResetRecord]:
        found: list[ResetRecord] = []
        for subscription in self.subscriptions.values():
            for window in subscription.credential.windows.values():
                assert isinstance(window, PhasedWindow | SimulatorWindow)
                found.extend(window.resets)
        return sorted(found, key=lambda r: (r.at, r.subscription, r.window))

    def window_tokens(self, window: str = "seven_day") -> Mapping[str, int]:
        """Tokens each subscription's ``window`` counted over the run (every window that
        ended plus the one in force), less what was used before the trace started."""
        totals: dict[str, int] = {}
        for spec, s in zip(self.fleet.subscriptions, self.subscriptions.values(), strict=True):
            counted = s.credential.windows[window]
            assert isinstance(counted, PhasedWindow | SimulatorWindow)
            total = counted.used + sum(r.used for r in counted.resets)
            totals[s.name] = total - spec.windows[window].used
        return totals


def _span(added_at: datetime | None, removed_at: datetime | None) -> tuple[float, float]:
    begins = to_unix(added_at) if added_at is not None else -math.inf
    return begins, to_unix(removed_at) if removed_at is not None else math.inf


def _served(model: str, tokens: int, rung: Rung) -> TurnOutcome:
    return TurnOutcome(
        status_code=200,
        ok=True,
        response="ok",
        model=model,
        input_tokens=tokens,
        output_tokens=0,
        override_echo=rung.wire_kind,
    )


def _refused(
    status: int, message: str, reset: datetime | None, at: datetime, rung: Rung, claim: str = ""
) -> TurnOutcome:
    # What the agent server's Messages API runtime reports for an upstream refusal.
    refusal = classify_runtime_refusal(
        api_error_status=status, text=message, now=at, reset_hint=reset
    )
    return TurnOutcome(
        status_code=status,
        ok=False,
        error_code=refusal.error_code,
        detail=f"API Error: {status} {message}",
        resets_at=refusal.resets_at,
        # The anthropic-api runtime passes the representative claim on a rate limit.
        limiting_window=claim if refusal.error_code == "rate_limit" else "",
        override_echo=rung.wire_kind,
    )
