"""The provider circuit breaker: closed, degraded, open, half-open; one per provider,
shared by every process through Redis.

Only provider-level failures drive it: a 5xx (``upstream_error``) or a turn that ran
out of time waiting on the upstream (``timeout``). An account refusal (429, 401,
billing) says the provider answered, so it never counts and never trips it. Failures
count across the provider's credentials, and only when at least ``min_credentials``
distinct ones failed: one broken plan is that plan's problem, not an outage.

- closed: nothing to see.
- degraded (``degraded_at`` failures in the window): turns run as usual; a provider
  error is still retried once on the same rung and never walks (the dispatch loop's
  rule), so the state is for the operator and the explainer.
- open (``open_at`` failures in the window): for ``cooldown`` new turns fail fast as
  ``upstream_error`` instead of walking the pool into the outage or dispatching.
- half-open (the cooldown is over): one trial turn goes through (a single-flight
  marker with a TTL, so a trial whose worker died does not hold the door shut); its
  success closes the breaker, its provider failure re-opens it.

The state machine is pure (``breaker_state``, a ``now`` argument, no Django, no
Redis); the store below it keeps the failures in a sorted set per provider and the
instant it opened. Redis unreachable (or not configured): the breaker reads closed.
It fails safe, because an outage of the breaker's store must never block turns; a
warning says so once per outage.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django_redis import get_redis_connection

from trinity import metrics
from trinity.markers import STORE_ERRORS, OutageNotice, marker_claim, marker_release
from trinity.notifications import notification_send

# The codes the agent server's contract gives a provider-level failure.
PROVIDER_FAILURE_CODES = frozenset({"upstream_error", "timeout"})
# An account refusal: the provider answered (so a half-open trial that meets one closes it).
ACCOUNT_REFUSAL_CODES = frozenset({"rate_limit", "auth"})

logger = logging.getLogger(__name__)


class BreakerState(StrEnum):
    CLOSED = "closed"
    DEGRADED = "degraded"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerRules:
    """The thresholds (trinity/settings.py reads them from the environment)."""

    window: timedelta = timedelta(seconds=60)
    degraded_at: int = 3
    open_at: int = 5
    min_credentials: int = 2
    cooldown: timedelta = timedelta(seconds=30)


@dataclass(frozen=True)
class Failure:
    """One provider-level failure: when, and on which credential (an id, never a secret)."""

    at: datetime
    credential: str


def is_provider_failure(error_code: str) -> bool:
    """Whether an attempt's typed error code counts against its provider."""
    return error_code in PROVIDER_FAILURE_CODES


def failures_state(
    failures: Sequence[Failure], *, now: datetime, rules: BreakerRules
) -> BreakerState:
    """What the failures in the window say: closed, degraded or open.

    A failure exactly ``window`` old is out of it. One stamped after ``now`` counts:
    another process's clock may run a little ahead, or its failure landed first.
    """
    recent = [f for f in failures if now - rules.window < f.at]
    if len({f.credential for f in recent}) < rules.min_credentials:
        return BreakerState.CLOSED
    if len(recent) >= rules.open_at:
        return BreakerState.OPEN
    if len(recent) >= rules.degraded_at:
        return BreakerState.DEGRADED
    return BreakerState.CLOSED


def breaker_state(
    *,
    failures: Sequence[Failure],
    opened_at: datetime | None,
    now: datetime,
    rules: BreakerRules,
) -> BreakerState:
    """The breaker's state now. Once opened it stays open for ``cooldown`` (whatever the
    failures say: they stop coming when nothing is sent), then half-open until a trial
    closes or re-opens it; the cooldown's last instant is already half-open."""
    if opened_at is not None:
        return BreakerState.OPEN if now < opened_at + rules.cooldown else BreakerState.HALF_OPEN
    return failures_state(failures, now=now, rules=rules)


def opens_on_failure(state_before: BreakerState, state_after: BreakerState) -> bool:
    """Whether a new failure (already counted into ``state_after``) opens the breaker:
    the failures crossed ``open_at``, or it is a provider failure seen half-open (the
    trial's, or a turn's that started before the breaker opened: the outage is on)."""
    if state_before is BreakerState.OPEN:
        return False  # already open: a late failure must not extend the cooldown
    return state_before is BreakerState.HALF_OPEN or state_after is BreakerState.OPEN


# The store (Redis)


@dataclass(frozen=True)
class BreakerView:
    """What the store says of one provider's breaker; ``reachable`` False reads closed."""

    state: BreakerState
    opened_at: datetime | None = None
    failures: int = 0
    reachable: bool = True


_outage = OutageNotice(
    "breaker store unreachable (or not Redis): the breaker reads closed", log=logger
)


def rules_from_settings() -> BreakerRules:
    return BreakerRules(
        window=timedelta(seconds=settings.TRINITY_BREAKER_WINDOW_SECONDS),
        degraded_at=settings.TRINITY_BREAKER_DEGRADED_FAILURES,
        open_at=settings.TRINITY_BREAKER_OPEN_FAILURES,
        min_credentials=settings.TRINITY_BREAKER_MIN_CREDENTIALS,
        cooldown=timedelta(seconds=settings.TRINITY_BREAKER_COOLDOWN_SECONDS),
    )


def _redis() -> Any:
    """The raw Redis client behind the cache; raises NotImplementedError without Redis."""
    return get_redis_connection("default")


def _keys(provider: str) -> tuple[str, str]:
    return (
        cache.make_key(f"breaker:{provider}:failures"),
        cache.make_key(f"breaker:{provider}:opened"),
    )


def _trial_marker(provider: str) -> str:
    return f"breaker-trial:{provider}"


# Unreachable, or no Redis at all (the embedded database cache has no sorted sets).
STORE_DOWN: tuple[type[Exception], ...] = (*STORE_ERRORS, NotImplementedError)


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def _decode(raw: Sequence[tuple[bytes | str, float]]) -> list[Failure]:
    found = []
    for member, score in raw:
        text = _text(member)
        found.append(Failure(datetime.fromtimestamp(score, UTC), text.rsplit("|", 1)[0]))
    return found


def _opened(raw: bytes | str | None) -> datetime | None:
    if raw is None:
        return None
    text = raw.decode() if isinstance(raw, bytes) else raw
    return datetime.fromtimestamp(float(text), UTC)


def breaker_read(*, provider: str, now: datetime, rules: BreakerRules | None = None) -> BreakerView:
    """The breaker of ``provider`` now: one round trip; never raises (closed if unreachable)."""
    rules = rules or rules_from_settings()
    failures_key, opened_key = _keys(provider)
    try:
        pipe = _redis().pipeline(transaction=False)
        pipe.zrangebyscore(failures_key, (now - rules.window).timestamp(), "+inf", withscores=True)
        pipe.get(opened_key)
        raw_failures, raw_opened = pipe.execute()
    except STORE_DOWN:
        _outage.down("read")
        return BreakerView(BreakerState.CLOSED, reachable=False)
    _outage.up()
    failures, opened_at = _decode(raw_failures), _opened(raw_opened)
    state = breaker_state(failures=failures, opened_at=opened_at, now=now, rules=rules)
    return BreakerView(state, opened_at, len(failures))


def _gate_state(provider: str, now: datetime) -> BreakerState:
    """Open, half-open, or closed, from the opened instant alone: one GET on the turn
    path. Closed and degraded admit a turn alike, and the failure that opens the
    breaker writes that instant, so the window's failures need not be read here."""
    rules = rules_from_settings()
    try:
        raw_opened = _redis().get(_keys(provider)[1])
    except STORE_DOWN:
        _outage.down("read")
        return BreakerState.CLOSED
    _outage.up()
    return breaker_state(failures=(), opened_at=_opened(raw_opened), now=now, rules=rules)


def breaker_failure_record(
    *, provider: str, credential: str, now: datetime, rules: BreakerRules | None = None
) -> tuple[BreakerState, bool]:
    """Count one provider-level failure on ``credential``; returns the state after it and
    whether this failure opened the breaker (exactly one process sees True per opening:
    the instant is written with SET NX, or over a half-open one by compare-and-set).

    Unreachable: (closed, False), nothing counted.
    """
    rules = rules or rules_from_settings()
    failures_key, opened_key = _keys(provider)
    ttl = int(rules.window.total_seconds()) + 60
    try:
        client = _redis()
        pipe = client.pipeline(transaction=True)
        member = f"{credential}|{uuid.uuid4().hex}"
        pipe.zadd(failures_key, {member: now.timestamp()})
        pipe.zremrangebyscore(failures_key, "-inf", (now - rules.window).timestamp())
        pipe.expire(failures_key, ttl)
        pipe.zrangebyscore(failures_key, "-inf", "+inf", withscores=True)
        pipe.get(opened_key)
        _, _, _, raw_failures, raw_opened = pipe.execute()
        failures, opened_at = _decode(raw_failures), _opened(raw_opened)
        # Before this failure: the set as it was, whatever the other members' stamps
        # (the transaction orders the failures, not their clocks).
        others = [f for f, m in zip(failures, raw_failures, strict=True) if _text(m[0]) != member]
        before = breaker_state(failures=others, opened_at=opened_at, now=now, rules=rules)
        after = breaker_state(failures=failures, opened_at=opened_at, now=now, rules=rules)
        if not opens_on_failure(before, after):
            _outage.up()
            return after, False
        stamp = repr(now.timestamp())
        if opened_at is None:
            opened = bool(client.set(opened_key, stamp, nx=True))
        else:
            # Half-open: re-open over the instant we read, once (two late failures
            # must not both notify).
            opened = bool(client.eval(_REOPEN, 1, opened_key, raw_opened, stamp))
    except STORE_DOWN:
        _outage.down("record")
        return BreakerState.CLOSED, False
    _outage.up()
    return BreakerState.OPEN, opened


# Compare-and-set of the opened instant.
_REOPEN = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
"""


def breaker_trial_claim(*, provider: str, ttl_seconds: int, holder: str = "1") -> bool:
    """Claim the half-open breaker's one trial for ``ttl_seconds``, so a dead worker's
    claim lapses; True also when the store is unreachable (fail safe: let it through)."""
    claimed = marker_claim(_trial_marker(provider), ttl=max(1, ttl_seconds), value=holder)
    return claimed is not False


def breaker_trial_end(
    *, provider: str, provider_failed: bool | None, holder: str | None = None
) -> None:
    """End the trial: ``False`` (the provider answered) closes the breaker and forgets
    the failures; ``True`` was already recorded as a failure (which re-opened it);
    ``None`` (the attempt said nothing about the provider) only frees the trial."""
    if provider_failed is False:
        failures_key, opened_key = _keys(provider)
        try:
            closed = _redis().delete(failures_key, opened_key)
        except STORE_DOWN:
            _outage.down("close")
        else:
            if closed:
                logger.info("provider %s: circuit breaker closed by a trial turn", provider)
                metrics.breaker_transition(provider=provider, state=BreakerState.CLOSED)
    # Only our own claim: one that lapsed under a long trial may be another's by now.
    marker_release(_trial_marker(provider), value=holder)


# What the dispatch loop calls

OUTAGE_NOTICE_TTL = 3600
# The longest one trial holds the door. A trial turn may run for many minutes; if its
# worker dies, every turn would fail fast until its claim lapsed. Past this, a second
# trial may go too (harmless: each settles the breaker by what it saw).
TRIAL_HOLD_MAX_SECONDS = 120


def breaker_turn_gate(
    *, provider: str, now: datetime, trial_seconds: int, holder: str = "1"
) -> tuple[bool, bool]:
    """Whether a new turn on ``provider`` may be sent: ``(allowed, is_trial)``.

    Closed or degraded: allowed. Open: not. Half-open: allowed only as the one trial
    (claimed by ``holder`` for the turn's ``trial_seconds``, at most
    ``TRIAL_HOLD_MAX_SECONDS``); the caller ends a trial with ``breaker_trial_end``.
    One GET while closed; never raises.
    """
    state = _gate_state(provider, now)
    if state is BreakerState.OPEN:
        return False, False
    if state is BreakerState.HALF_OPEN:
        ttl = min(trial_seconds, TRIAL_HOLD_MAX_SECONDS)
        claimed = breaker_trial_claim(provider=provider, ttl_seconds=ttl, holder=holder)
        return claimed, claimed
    return True, False


def breaker_failure_observe(*, provider: str, credential: str, now: datetime) -> BreakerState:
    """Count a provider-level failure; the state after it. The process whose failure
    opened the breaker tells the operator (deduplicated) and counts the transition."""
    rules = rules_from_settings()
    state, opened = breaker_failure_record(
        provider=provider, credential=credential, now=now, rules=rules
    )
    if opened:
        logger.warning("provider %s: circuit breaker opened after repeated errors", provider)
        metrics.breaker_transition(provider=provider, state=BreakerState.OPEN)
        notification_send(
            kind="provider_outage",
            level="critical",
            title=f"Provider {provider!r} looks down: turns fail fast",
            body=f"Repeated provider errors (5xx, timeouts) across {provider} credentials "
            f"opened its circuit breaker. New turns fail fast for "
            f"{int(rules.cooldown.total_seconds())} s instead of walking the pool; then one "
            "trial turn decides whether it closes.",
            dedup_key=f"provider-outage:{provider}",
            dedup_ttl=OUTAGE_NOTICE_TTL,
            data={"provider": provider},
            now=now,
        )
    return state


def breaker_open_now(*, provider: str, now: datetime) -> bool:
    """Whether the breaker is open (a walk step consults it); False when unreachable."""
    return _gate_state(provider, now) is BreakerState.OPEN


def trial_verdict(error_codes: Sequence[str], *, served: bool) -> bool | None:
    """What a trial turn's attempts say of its provider: True (a provider failure),
    False (it answered: served, or an account refusal), None (nothing either way)."""
    if any(is_provider_failure(code) for code in error_codes):
        return True
    if served or any(code in ACCOUNT_REFUSAL_CODES for code in error_codes):
        return False
    return None
