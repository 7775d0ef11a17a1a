"""The headroom rules: pure functions of readings and ``now``.

No Django and no Redis here, so the tests read as tables. Callers pass the freshness
limit (``max_age``) from settings; the fixed policy (the 30-minute life of a 5h figure,
10-point bands) lives here as constants.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple, cast

from subscriptions.headroom.reading import (
    CORE_WINDOWS,
    FIVE_HOUR,
    NON_BLOCKING_STATUSES,
    SEVEN_DAY,
    Reading,
    ReadingStatus,
    WindowReading,
)

# A 5h window can go from empty to full within the hour; an older figure says little.
FIVE_HOUR_COUNTS_FOR = timedelta(minutes=30)
BAND_POINTS = 10
TOP_BAND = 100 // BAND_POINTS


def family_window(model: str) -> str | None:
    """The model-family weekly window a turn on ``model`` also spends, if any."""
    lowered = model.lower()
    for family in ("opus", "sonnet"):
        if family in lowered:
            return f"seven_day_{family}"
    return None


def _relevant(reading: Reading, family: str | None) -> Iterator[tuple[str, WindowReading]]:
    """The windows that decide whether a turn can run: the core two and its family's."""
    windows = reading.windows
    for name in CORE_WINDOWS:
        window = windows.get(name)
        if window is not None:
            yield name, window
    if family is not None:
        window = windows.get(family)
        if window is not None:
            yield family, window


# The usability gate and the classification


class Gate(StrEnum):
    USABLE = "usable"
    ABSENT = "absent"
    STALE = "stale"
    WINDOW_RESET = "window_reset"
    NO_ANSWER = "no_answer"
    MALFORMED = "malformed"


class Tier(StrEnum):
    MEASURED = "measured"
    UNKNOWN = "unknown"
    REFUSING = "refusing"


class Headroom(NamedTuple):
    """What a reading says about one subscription at ``now``.

    ``five_hour``/``seven_day`` are the reading's figures; ``fullness`` is the figure
    that ranks (the fuller weekly window, and the 5h one while it counts), and
    ``band`` its 10-point band. A NamedTuple: ranking builds one per candidate.
    """

    tier: Tier
    gate: Gate
    five_hour: float | None = None
    seven_day: float | None = None
    fullness: float | None = None
    fetched_at: datetime | None = None
    band: int | None = None

    def age_seconds(self, now: datetime) -> float | None:
        return (now - self.fetched_at).total_seconds() if self.fetched_at is not None else None


_ABSENT = Headroom(Tier.UNKNOWN, Gate.ABSENT)
NO_EVIDENCE = _ABSENT


# Hot-path aliases: enum attribute lookups cost more than the comparisons they feed,
# and ranking 10,000 candidates runs this code 10,000 times.
_USABLE, _STALE, _NO_ANSWER = Gate.USABLE, Gate.STALE, Gate.NO_ANSWER
_WINDOW_RESET, _MALFORMED = Gate.WINDOW_RESET, Gate.MALFORMED
_MEASURED, _UNKNOWN, _REFUSING = Tier.MEASURED, Tier.UNKNOWN, Tier.REFUSING
_OK, _ERROR = ReadingStatus.OK, ReadingStatus.ERROR
_new = tuple.__new__


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_US_PER_SECOND = 1_000_000


def _us(value: datetime | None) -> int | None:
    # Exact: integer microseconds compare as the instants do, whatever their tzinfo.
    return (value - _EPOCH) // _MICROSECOND if value is not None else None


class _Fast(NamedTuple):
    """A reading as the ranking reads it, independent of ``now`` and the family.

    ``windows``: name -> (utilization, reset µs, malformed, blocking, remaining,
    duration s). ``core_*`` summarise the core windows as ``_classify`` walks them: the
    earliest reset up to the first malformed one, whether one is, whether any blocks.
    """

    fetched: int
    status: ReadingStatus
    reset: int | None
    five_hour: float | None
    seven_day: float | None
    core_reset: int | None
    core_malformed: bool
    core_blocked: bool
    windows: dict[str, tuple[float | None, int | None, bool, bool, float | None, float]]


def _fast_of(reading: Reading) -> _Fast:
    """``reading``'s precomputed form, built once and kept on the reading."""
    fast = reading._fast
    if fast is None:
        fast = _fast_build(reading)
        object.__setattr__(reading, "_fast", fast)
    return cast(_Fast, fast)


def _fast_build(reading: Reading) -> _Fast:
    windows = {}
    for name, window in reading.windows.items():
        utilization, resets_at, status = window
        windows[name] = (
            utilization,
            _us(resets_at),
            status is None or utilization is None,
            status not in NON_BLOCKING_STATUSES,
            None if utilization is None else 100.0 - utilization,
            _DURATION_SECONDS.get(name, _WEEK_SECONDS),
        )
    core_reset: int | None = None
    core_malformed = core_blocked = False
    for name in CORE_WINDOWS:
        found = windows.get(name)
        if found is None:
            continue
        reset = found[1]
        if reset is not None and (core_reset is None or reset < core_reset):
            core_reset = reset
        if found[2]:
            core_malformed = True
            break
        if found[3]:
            core_blocked = True
    five, seven = windows.get(FIVE_HOUR), windows.get(SEVEN_DAY)
    return _Fast(
        cast(int, _us(reading.fetched_at)),
        reading.status,
        _us(reading.reset_at),
        five[0] if five is not None else None,
        seven[0] if seven is not None else None,
        core_reset,
        core_malformed,
        core_blocked,
        windows,
    )


def _classify(
    reading: Reading | None,
    now: datetime,
    oldest: datetime,
    five_hour_since: datetime,
    family: str | None,
) -> Headroom:
    """The gate and the tier in one pass (``_classify_us`` with datetimes).

    ``oldest`` is the oldest fetch instant still fresh, ``five_hour_since`` the
    oldest whose 5h figure still counts, ``family`` the turn's family window.
    """
    if reading is None:
        return _ABSENT
    return _classify_us(
        reading,
        _fast_of(reading),
        cast(int, _us(now)),
        cast(int, _us(oldest)),
        cast(int, _us(five_hour_since)),
        family,
    )


def _classify_us(
    reading: Reading, fast: _Fast, now: int, oldest: int, five_hour_since: int, family: str | None
) -> Headroom:
    # Ranking calls this once per candidate, instants as microseconds. The windows are
    # judged in order (five_hour, seven_day, the family's) and the first that has
    # reset or is malformed decides; ``_fast_build`` summarised the core two.
    fetched, status, reset_at, five_hour, seven_day, core_reset, malformed, blocked, windows = fast
    extra = windows.get(family) if family is not None else None
    if fetched < oldest:
        gate = _STALE
    elif status is _ERROR:
        gate = _NO_ANSWER
    elif reset_at is not None and reset_at <= now:
        gate = _WINDOW_RESET
    else:
        if core_reset is not None and core_reset <= now:
            gate = _WINDOW_RESET
        elif malformed:
            gate = _MALFORMED
        else:
            gate = _USABLE
            if extra is not None:
                extra_reset = extra[1]
                if extra_reset is not None and extra_reset <= now:
                    gate = _WINDOW_RESET
                elif extra[2]:
                    gate = _MALFORMED
                elif extra[3]:
                    blocked = True
            if gate is _USABLE and status is _OK and seven_day is None:
                gate = _MALFORMED
    if gate is not _USABLE:
        return _new(
            Headroom, (_UNKNOWN, gate, five_hour, seven_day, None, reading.fetched_at, None)
        )
    if status is not _OK or blocked:
        # A usable reading that is not serving is a fresh refusal.
        return _new(
            Headroom, (_REFUSING, gate, five_hour, seven_day, None, reading.fetched_at, None)
        )
    # The gate lets a serving reading through only with every deciding figure present
    # (no ``cast`` calls: this runs once per candidate).
    fullness = seven_day if seven_day is not None else 0.0
    if extra is not None:
        extra_utilization = extra[0]
        if extra_utilization is not None and extra_utilization > fullness:
            fullness = extra_utilization  # the family window spends like the weekly
    if five_hour is not None and five_hour > fullness and fetched >= five_hour_since:
        fullness = five_hour
    band = int(fullness // BAND_POINTS)
    if band > TOP_BAND:  # not ``min()``: a builtin call per candidate
        band = TOP_BAND
    return _new(
        Headroom, (_MEASURED, gate, five_hour, seven_day, fullness, reading.fetched_at, band)
    )


def classify_headroom(
    reading: Reading | None, *, now: datetime, max_age: timedelta, family: str | None = None
) -> Headroom:
    """Measured (serving, with figures), refusing (a fresh refusal), or unknown.

    Only a usable reading (see ``reading_gate``) is measured or refusing; anything
    else is unknown. The 5h figure counts toward fullness while at most 30 minutes
    old; the turn's family window counts like the weekly one.
    """
    return _classify(reading, now, now - max_age, now - FIVE_HOUR_COUNTS_FOR, family)


def reading_gate(
    reading: Reading | None, *, now: datetime, max_age: timedelta, family: str | None = None
) -> Gate:
    """Whether ``reading`` may be used as evidence at ``now``, and if not, why.

    Fresh while at most ``max_age`` old. A reading whose window resets at or
    before ``now`` is stale whatever its age: that quota no longer exists. Usable
    readings answered (no ``error``), and a serving one carries a weekly figure and
    a status and figure for every window that decides.
    """
    return classify_headroom(reading, now=now, max_age=max_age, family=family).gate


def _blocked(reading: Reading, family: str | None) -> bool:
    return any(window.blocking for _, window in _relevant(reading, family))


# Rate limited now (display) and readmission (walk)


def _superseded(reading: Reading, last_refusal_at: datetime | None) -> bool:
    # A refusal recorded after the reading is newer evidence than the reading.
    return last_refusal_at is not None and reading.fetched_at <= last_refusal_at


def reading_says_limited(
    reading: Reading | None,
    *,
    now: datetime,
    max_age: timedelta,
    last_refusal_at: datetime | None = None,
    family: str | None = None,
    refusal_window: str | None = None,
) -> bool | None:
    """True/False when a usable reading decides whether the provider limits now, else None.

    A healthy reading taken at or before the latest refusal decides nothing: the
    refusal is newer. An ``invalid_token`` reading is not about rate limits. With
    ``family`` (a turn's family window) that window's block limits too. A healthy
    reading that does not describe the family window the refusal named
    (``refusal_window``) decides nothing either: a served Opus turn's headers say
    nothing about the Sonnet week, and absence of evidence readmits nothing.
    """
    headroom = classify_headroom(reading, now=now, max_age=max_age, family=family)
    if reading is None or headroom.gate is not Gate.USABLE:
        return None
    if reading.status is ReadingStatus.RATE_LIMITED:
        return True
    if reading.status is not ReadingStatus.OK:
        return None
    if headroom.tier is Tier.REFUSING:
        return True
    if _superseded(reading, last_refusal_at):
        return None
    if (
        refusal_window is not None
        and refusal_window.startswith(SEVEN_DAY + "_")
        and refusal_window not in reading.windows
    ):
        return None
    return False


def resolve_rate_limited_now(
    reading: Reading | None,
    *,
    now: datetime,
    max_age: timedelta,
    events_say_limited: Callable[[], bool],
    last_refusal_at: datetime | None = None,
    refusal_resets_at: datetime | None = None,
    family: str | None = None,
    refusal_window: str | None = None,
) -> bool:
    """Three-state: a usable reading decides; only without one do the 2h events decide.

    The two sources are never OR'd, and ``events_say_limited`` is called only when
    the reading cannot decide. Without a usable reading, an elapsed reset that the
    refusal predates (the reading's blocked window, or the refusal's own reset)
    means the quota is back: the same evidence that readmits a candidate in
    ``recovery_verdict``, so display, pre-dispatch and ranking agree on one reading.
    ``family`` is the turn's family window (None for the display): its block limits
    too. The caller passes only a refusal that blocks that family (``refusal_blocks``).
    """
    decided = reading_says_limited(
        reading,
        now=now,
        max_age=max_age,
        last_refusal_at=last_refusal_at,
        family=family,
        refusal_window=refusal_window,
    )
    if decided is not None:
        return decided
    if (
        recovery_verdict(
            reading,
            now=now,
            max_age=max_age,
            last_failure_at=last_refusal_at,
            family=family,
            refusal_resets_at=refusal_resets_at,
        )
        is Verdict.WINDOW_RESET
    ):
        return False
    return events_say_limited()


class Verdict(StrEnum):
    SERVING_NOW = "serving_now"
    WINDOW_RESET = "window_reset"


# What a refusal names, and how long it keeps a subscription out

# The ``limiting_window`` of a throttle: a 429 that carried no quota evidence (no reset,
# no window). No quota window limits; the subscription backs off briefly.
THROTTLE = "throttle"
_FAMILY_WINDOW_PREFIX = "seven_day_"
# The CLI prints a reset to the minute ("resets 4:10am"), truncated or rounded, and a
# provider's reset jitters by seconds: within a minute is the same instant.
RESET_MATCH = timedelta(minutes=1)
THROTTLE_FIRST_BACKOFF = timedelta(minutes=1)
THROTTLE_MAX_BACKOFF = timedelta(minutes=15)
# A throttle continues a streak only when it follows the previous one this closely:
# twice the longest backoff, so a plan readmitted after 15 minutes and throttled at
# once still doubles, while one throttled again next hour starts over at a minute.
THROTTLE_STREAK_GAP = 2 * THROTTLE_MAX_BACKOFF


def refusal_blocks(limiting_window: str | None, family: str | None) -> bool:
    """Whether a refusal that named ``limiting_window`` keeps out a turn of ``family``.

    A family window (``seven_day_sonnet``) keeps out only that family's turns; the core
    windows, a throttle and an unknown window ("") keep out every turn. A turn whose
    family is unknown (None: a model naming none, or no model, where the runtime picks
    its default) is kept out by any family's block: the block may be about it.
    """
    if not limiting_window or not limiting_window.startswith(_FAMILY_WINDOW_PREFIX):
        return True
    return family is None or limiting_window == family


def refusal_window(
    reading: Reading | None,
    *,
    resets_at: datetime | None,
    now: datetime,
    claim: str = "",
    family: str | None = None,
) -> str:
    """The window a refusal was limited by ("" when nothing says).

    The provider's representative claim (``claim``) when the runtime saw it; else the
    cached reading's window whose reset is the refusal's (within ``RESET_MATCH``); else
    the reading's blocked windows that have not reset. Only the windows the refused
    turn spends count: the core two and its ``family``'s (every window when the
    family is unknown), so another family's block never explains this refusal. Among
    several, a blocked one first, then a core window (it keeps out every family: the
    safe side of an ambiguity, e.g. a weekly and a family window that started
    together), then the latest reset.
    """
    if claim:
        return claim
    if reading is None:
        return ""
    windows = {
        name: window
        for name, window in reading.windows.items()
        if family is None or name in CORE_WINDOWS or name == family
    }
    found: list[str] = []
    if resets_at is not None:
        found = [
            name
            for name, window in windows.items()
            if window.resets_at is not None and abs(window.resets_at - resets_at) <= RESET_MATCH
        ]
    if not found:
        found = [
            name
            for name, window in windows.items()
            if window.blocking and (window.resets_at is None or window.resets_at > now)
        ]
    if not found:
        return ""

    def preference(name: str) -> tuple[bool, bool, float]:
        window = windows[name]
        reset = window.resets_at.timestamp() if window.resets_at is not None else 0.0
        return (not window.blocking, name not in CORE_WINDOWS, -reset)

    return min(found, key=preference)


def throttle_backoff(earlier: Iterable[tuple[str, datetime]], *, now: datetime) -> timedelta:
    """How long a throttled subscription backs off: 1 minute, doubling per consecutive
    throttle, at most 15 minutes.

    ``earlier`` is the subscription's earlier refusals as (limiting_window, occurred_at),
    newest first. The streak counts throttles back from ``now`` while each follows the
    previous within ``THROTTLE_STREAK_GAP``; any other refusal ends it.
    """
    streak = 0
    later = now
    for window, at in earlier:
        if window != THROTTLE or later - at > THROTTLE_STREAK_GAP:
            break
        streak += 1
        later = at
        if THROTTLE_FIRST_BACKOFF * 2**streak >= THROTTLE_MAX_BACKOFF:
            break
    return min(THROTTLE_FIRST_BACKOFF * 2**streak, THROTTLE_MAX_BACKOFF)


class RefusalLimit(NamedTuple):
    """What a rate-limit refusal is recorded with: its window and when it lifts."""

    limiting_window: str
    resets_at: datetime | None


def refusal_limit(
    reading: Reading | None,
    *,
    resets_at: datetime | None,
    claim: str,
    throttle: bool,
    earlier: Callable[[], Iterable[tuple[str, datetime]]],
    now: datetime,
    family: str | None = None,
) -> RefusalLimit:
    """The window and reset a subscription's rate-limit refusal is recorded with.

    The window is ``refusal_window``'s. A ``throttle`` (no quota evidence in the
    refusal) whose cached reading names no blocked window either is recorded as
    ``THROTTLE`` with its backoff's end as the reset, so the readmission that follows
    a reset applies; ``earlier`` (called only then) lists the subscription's earlier
    refusals as ``throttle_backoff`` takes them.
    """
    window = refusal_window(reading, resets_at=resets_at, now=now, claim=claim, family=family)
    if throttle and not window:
        return RefusalLimit(THROTTLE, now + throttle_backoff(earlier(), now=now))
    return RefusalLimit(window, resets_at)


def _binding_reset(reading: Reading, family: str | None) -> datetime | None:
    """When a limited reading's refusal lifts: the latest reset of its blocked windows."""
    latest = reading.reset_at if reading.status is ReadingStatus.RATE_LIMITED else None
    windows = reading.windows
    for name in (FIVE_HOUR, SEVEN_DAY, family):
        window = windows.get(name) if name is not None else None
        if window is None or window.resets_at is None or not window.blocking:
            continue
        if latest is None or window.resets_at > latest:
            latest = window.resets_at
    return latest


def _verdict(
    reading: Reading | None,
    headroom: Headroom,
    now: datetime,
    last_failure_at: datetime | None,
    family: str | None,
    refusal_resets_at: datetime | None = None,
) -> Verdict | None:
    if reading is not None and headroom.gate is Gate.USABLE:
        if headroom.tier is Tier.REFUSING:
            # A fresh refusal is the strongest evidence; no instant overrules it.
            return None
        if not _superseded(reading, last_failure_at):
            return Verdict.SERVING_NOW
    binding = _binding_reset(reading, family) if reading is not None else None
    for reset in (binding, refusal_resets_at):
        if reset is None or reset > now:
            continue
        if last_failure_at is not None and reset <= last_failure_at:
            # Refused again after that reset: the reset did not bring the quota back.
            continue
        return Verdict.WINDOW_RESET
    return None


def recovery_verdict(
    reading: Reading | None,
    *,
    now: datetime,
    max_age: timedelta,
    last_failure_at: datetime | None,
    family: str | None = None,
    refusal_resets_at: datetime | None = None,
) -> Verdict | None:
    """Why a skip-listed subscription may be tried again, or None.

    ``serving_now``: a fresh reading, taken after the failure, says it serves.
    ``window_reset``: no fresh serving reading, but a reset has elapsed that is later
    than the failure: the reading's blocked window's, or the one the refusal itself
    carried (``refusal_resets_at``). A fresh refusing reading readmits nothing, and
    neither does anything else.
    """
    headroom = classify_headroom(reading, now=now, max_age=max_age, family=family)
    return _verdict(reading, headroom, now, last_failure_at, family, refusal_resets_at)


def earliest_known_reset(
    readings: Iterable[Reading | None],
    *,
    now: datetime,
    family: str | None = None,
    refusal_resets: Iterable[datetime | None] = (),
) -> datetime | None:
    """The soonest instant after ``now`` at which a limited credential serves again.

    Read from the readings' blocked windows and from the resets refusals carried.
    Never an instant at or before ``now``; None when nothing names one.
    """
    found: datetime | None = None
    instants = [_binding_reset(r, family) for r in readings if r is not None]
    for instant in (*instants, *refusal_resets):
        if instant is not None and instant > now and (found is None or instant < found):
            found = instant
    return found


def reading_replaces(prior: Reading | None, reading: Reading) -> bool:
    """Whether a new reading replaces the stored one: an ``error`` never replaces an
    answer (the answer stays evidence until it goes stale, and a limited reading keeps
    the reset a readmission needs)."""
    return reading.answered or prior is None or not prior.answered


# The sampler's cadence


def probe_due(
    reading: Reading | None,
    *,
    now: datetime,
    interval: timedelta,
    limited_interval: timedelta,
    last_failure_at: datetime | None = None,
) -> bool:
    """Whether the sampler should probe now.

    Absent → due. A reading whose window has reset → due. Believed limited (a
    limited reading, or a refusal after the reading) → due after ``limited_interval``;
    otherwise after ``interval``. Both less a little slack, so a reading taken during
    the last sweep does not miss this one by a second.
    """
    if reading is None:
        return True
    if reading.reset_at is not None and reading.reset_at <= now:
        return True
    for window in reading.windows.values():
        if window.resets_at is not None and window.resets_at <= now:
            return True
    believed_limited = (
        reading.status is ReadingStatus.RATE_LIMITED
        or (reading.status is ReadingStatus.OK and _blocked(reading, None))
        or (last_failure_at is not None and last_failure_at >= reading.fetched_at)
    )
    every = limited_interval if believed_limited else interval
    slack = min(every / 10, timedelta(seconds=30))
    return now - reading.fetched_at >= every - slack


# Alerts


class AlertLevel(StrEnum):
    WARNING = "warning"
    CRITICAL = "critical"


CRITICAL_FLOOR = 90


@dataclass(frozen=True, slots=True)
class AlertCrossing:
    window: str
    level: AlertLevel
    utilization: float
    resets_at: datetime | None


def alert_crossings(reading: Reading, *, threshold: int) -> list[AlertCrossing]:
    """Windows at or over the alert threshold, each at the highest level it reached.

    ``threshold`` 0 turns alerts off; the critical level is max(threshold, 90).
    Only answered readings alert (an error carries no figures).
    """
    if threshold <= 0 or reading.status not in (ReadingStatus.OK, ReadingStatus.RATE_LIMITED):
        return []
    critical = max(threshold, CRITICAL_FLOOR)
    crossings = []
    for name, window in reading.windows.items():
        if window.utilization is None or window.utilization < threshold:
            continue
        level = AlertLevel.CRITICAL if window.utilization >= critical else AlertLevel.WARNING
        crossings.append(AlertCrossing(name, level, window.utilization, window.resets_at))
    return crossings


# Ranking


class Candidate(NamedTuple):
    """A subscription the filter let through, in load-balance (DB) order.

    ``last_failure_at`` is set when it refused within the skip window (skip-listed),
    unless that refusal named another model family's window (``refusal_blocks``).
    """

    subscription_id: int
    name: str
    agent_count: int
    last_failure_at: datetime | None = None
    # The reset instant the latest refusal carried, when it carried one.
    last_failure_resets_at: datetime | None = None
    # The window the latest refusal named (``limiting_window``; "" or None: unknown).
    last_failure_window: str | None = None


class Ranked(NamedTuple):
    """One ranked candidate. ``score`` and ``limiting_window`` are the balanced
    strategy's (``balance_of``); the banded strategy leaves them None."""

    candidate: Candidate
    tier: Tier
    headroom: Headroom
    readmitted: Verdict | None = None
    score: float | None = None
    limiting_window: str | None = None


# The balanced (reset-aware) strategy and its hysteresis

BANDED, BALANCED = "banded", "balanced"  # trinity.models.RoutingStrategy's values
WINDOW_DURATIONS = {
    FIVE_HOUR: timedelta(hours=5),
    SEVEN_DAY: timedelta(days=7),
    "seven_day_opus": timedelta(days=7),
    "seven_day_sonnet": timedelta(days=7),
}
# A window about to reset is worth more than its remaining figure, but not without
# bound: 5 % of the window left weighs as much as any less.
PACE_FLOOR = 0.05
# Hysteresis, in percent remaining of the limiting window: a plan in use keeps its
# agents down to INCUMBENT_FLOOR (it leaves strictly below); any other plan is
# admitted only strictly above ADMISSION_FLOOR; a challenger displaces the incumbent
# only when its score is strictly more than DISPLACE_MARGIN times the incumbent's.
INCUMBENT_FLOOR = 2.0
ADMISSION_FLOOR = 5.0
# 1.2 as a ratio of integers: ``score * 5 > incumbent * 6`` is exact at the boundary
# where ``score > incumbent * 1.2`` is at the mercy of 1.2's binary rounding.
DISPLACE_OVER, DISPLACE_UNDER = 6, 5


class Balance(NamedTuple):
    """What the balanced strategy reads from one serving reading.

    ``score`` is the tightest window's remaining / pace; ``remaining`` the lowest
    remaining percent of the deciding windows (the one nearest to refusing);
    ``window`` the name of the window that set the score.
    """

    score: float
    remaining: float
    window: str


def window_score(
    utilization: float, resets_at: datetime | None, duration: timedelta, now: datetime
) -> float:
    """remaining / clamp(time_left / duration, 0.05, 1); an unknown reset counts as
    a whole window left (the least the figure can be worth)."""
    remaining = 100.0 - utilization
    if resets_at is None:
        return remaining
    pace = (resets_at - now) / duration
    if pace < PACE_FLOOR:
        pace = PACE_FLOOR
    elif pace > 1.0:
        pace = 1.0
    return remaining / pace


def _balance(
    reading: Reading, now: datetime, five_hour_since: datetime, family: str | None
) -> Balance:
    return _new(
        Balance,
        _balance_us(
            _fast_of(reading), cast(int, _us(now)), cast(int, _us(five_hour_since)), family
        ),
    )


def _balance_us(
    fast: _Fast, now: int, five_hour_since: int, family: str | None
) -> tuple[float, float, str]:
    """``Balance``'s fields as a plain tuple: the ranking unpacks it at once."""
    # Called only for a measured (serving, usable) reading: every deciding window
    # present carries a figure. The 5h figure counts while it counts for banded.
    # ``window_score`` inlined on microseconds (the same float arithmetic as its
    # ``total_seconds()``): ranking 10,000 candidates runs this 10,000 times.
    windows = fast[8]
    best_score = 0.0
    best_name = ""
    remaining = 100.0
    skip_five = fast[0] < five_hour_since
    for name in _CORE_WINDOWS if family is None else (FIVE_HOUR, SEVEN_DAY, family):
        window = windows.get(name)
        if window is None:
            continue
        left = window[4]
        if left is None or (skip_five and name == FIVE_HOUR):
            continue
        resets_at = window[1]
        if resets_at is None:
            score = left
        else:
            pace = (resets_at - now) / _US_PER_SECOND / window[5]
            score = left / (PACE_FLOOR if pace < PACE_FLOOR else 1.0 if pace > 1.0 else pace)
        if left < remaining:
            remaining = left
        if not best_name or score < best_score:
            best_score, best_name = score, name
    if not best_name:  # unreachable for a measured reading (it has a weekly figure)
        return 100.0, 100.0, SEVEN_DAY
    return best_score, remaining, best_name


_CORE_WINDOWS = (FIVE_HOUR, SEVEN_DAY)
_DURATION_SECONDS = {name: d.total_seconds() for name, d in WINDOW_DURATIONS.items()}
_WEEK_SECONDS = timedelta(days=7).total_seconds()


def _by_key(items: list[Ranked], keys: list[float]) -> Iterator[Ranked]:
    # Stable: equal keys keep the order given (the load-balance order).
    return map(items.__getitem__, sorted(range(len(keys)), key=keys.__getitem__))


def balance_of(
    reading: Reading | None, *, now: datetime, max_age: timedelta, family: str | None = None
) -> Balance | None:
    """The balanced figures of a measured reading at ``now``; None when it is not
    measured (unknown or refusing: see ``classify_headroom``)."""
    five_hour_since = now - FIVE_HOUR_COUNTS_FOR
    headroom = _classify(reading, now, now - max_age, five_hour_since, family)
    if reading is None or headroom.tier is not Tier.MEASURED:
        return None
    return _balance(reading, now, five_hour_since, family)


def admitted(balance: Balance) -> bool:
    """Whether a plan not in use may take an agent: strictly above 5 % remaining."""
    return balance.remaining > ADMISSION_FLOOR


def incumbent_holds(balance: Balance) -> bool:
    """Whether the plan in use keeps its agent: down to 2 % remaining, inclusive."""
    return balance.remaining >= INCUMBENT_FLOOR


class Move(StrEnum):
    STAY = "stay"
    # The incumbent fell below its floor (or refuses) and an admitted plan exists.
    LEAVE = "leave"
    # Both hold, and the challenger scores strictly more than 20 % better.
    DISPLACE = "displace"


def hysteresis_move(
    incumbent: Balance | None, challenger: Balance | None, *, incumbent_refusing: bool = False
) -> Move:
    """Whether an agent on ``incumbent`` should move to ``challenger``.

    A challenger must be admitted (strictly above 5 %). An incumbent with no measure
    (no usable reading) stays: moving on missing telemetry is the walk's business,
    on a real refusal. A refusing incumbent, or one strictly below 2 %, leaves for
    any admitted challenger; otherwise the challenger must score strictly more than
    1.2 times the incumbent (exactly 20 % better does not displace).
    """
    if challenger is None or not admitted(challenger):
        return Move.STAY
    if incumbent_refusing:
        return Move.LEAVE
    if incumbent is None:
        return Move.STAY
    if not incumbent_holds(incumbent):
        return Move.LEAVE
    if challenger.score * DISPLACE_UNDER > incumbent.score * DISPLACE_OVER:
        return Move.DISPLACE
    return Move.STAY


class Rebalance(NamedTuple):
    """One move ``rebalance_plan`` proposes: ``agent`` (the caller's key) from its
    subscription ``from_id`` to ``to`` (a ranked candidate), and why."""

    agent: Hashable
    from_id: int
    to: Ranked
    move: Move
    incumbent: Balance | None
    challenger: Balance


def rebalance_plan(
    agents: Sequence[tuple[Hashable, int, str | None]],
    candidates: Sequence[Candidate],
    readings: Mapping[int, Reading],
    *,
    now: datetime,
    max_age: timedelta,
) -> list[Rebalance]:
    """The moves the hysteresis calls for, off the turn path (the sampler's sweep).

    ``agents`` are (key, assigned subscription, family window) in the order to
    consider them; ``candidates`` every subscription they may move to, in
    load-balance order. Each agent's challenger is the best balanced candidate
    (``rank_candidates``) other than its own; ``hysteresis_move`` decides. An
    incumbent that refused within the skip window (dropped, or skip-listed and not
    readmitted) counts as refusing. Each subscription receives at most one agent per
    plan: the readings move only at the next sweep, and agents piled onto one plan on
    the same evidence would drain it together (the next agent takes the next best).
    """
    rankings: dict[str | None, tuple[Ranking, frozenset[int]]] = {}
    taken: set[int] = set()
    moves: list[Rebalance] = []
    for key, current, family in agents:
        found = rankings.get(family)
        if found is None:
            ranking = rank_candidates(
                candidates, readings, now=now, max_age=max_age, family=family, strategy=BALANCED
            )
            refused = frozenset(c.subscription_id for c in (*ranking.dropped, *ranking.last_resort))
            found = rankings[family] = (ranking, refused)
        ranking, refused = found
        target = next(
            (
                r
                for r in ranking.ranked
                if r.candidate.subscription_id != current
                and r.candidate.subscription_id not in taken
            ),
            None,
        )
        if target is None or target.score is None:
            continue  # nothing measured to move to: admitted candidates rank first
        challenger = balance_of(
            readings.get(target.candidate.subscription_id), now=now, max_age=max_age, family=family
        )
        if challenger is None:
            continue
        incumbent = balance_of(readings.get(current), now=now, max_age=max_age, family=family)
        move = hysteresis_move(incumbent, challenger, incumbent_refusing=current in refused)
        if move is Move.STAY:
            continue
        taken.add(target.candidate.subscription_id)
        moves.append(Rebalance(key, current, target, move, incumbent, challenger))
    return moves


@dataclass(frozen=True, slots=True)
class Ranking:
    """Ranked candidates first, then skip-listed ones nothing readmitted (DB order).

    ``dropped`` holds fresh refusals: they are not tried at all.
    """

    ranked: tuple[Ranked, ...]
    last_resort: tuple[Candidate, ...]
    dropped: tuple[Candidate, ...]


def rank_candidates(
    candidates: Sequence[Candidate],
    readings: Mapping[int, Reading],
    *,
    now: datetime,
    max_age: timedelta,
    family: str | None = None,
    strategy: str = BANDED,
) -> Ranking:
    """Order ``candidates`` (given in load-balance order) by what their readings say.

    Banded (the default): measured candidates come first, by 10-point band of their
    fullness, then by agent count; unknown ones follow in the order given.
    Balanced: measured candidates the hysteresis admits (strictly above 5 %
    remaining) come first by score (``balance_of``), highest first, equal scores in
    the order given; then unknown ones; then measured ones not admitted, by score
    (a nearly spent plan is still a plan before the key). A fresh refusal is dropped;
    a skip-listed candidate is ranked only if readmitted, and a ``window_reset``
    readmission ranks as unknown (its figures describe the window that reset). A
    refusal that named another family's window does not skip-list (``refusal_blocks``).
    """
    # Measured candidates go to (band, agent count) buckets, each kept in the given
    # order: a handful of keys to sort instead of thousands of candidates.
    measured: dict[tuple[int, int], list[Ranked]] = {}
    balanced = strategy == BALANCED
    # Balanced: the admitted and the not admitted measured candidates, each beside a
    # list of their -score sort keys (parallel lists, not pairs: 10,000 pair tuples
    # outlive the loop and cost the garbage collector more than the sort).
    scored: list[Ranked] = []
    scored_keys: list[float] = []
    spent: list[Ranked] = []
    spent_keys: list[float] = []
    unknown: list[Ranked] = []
    last_resort: list[Candidate] = []
    dropped: list[Candidate] = []
    now_us = cast(int, _us(now))
    oldest_us = cast(int, _us(now - max_age))
    five_hour_since_us = cast(int, _us(now - FIVE_HOUR_COUNTS_FOR))
    get = readings.get
    window_reset = Verdict.WINDOW_RESET
    for candidate in candidates:
        reading = get(candidate[0])
        if reading is None:
            headroom = _ABSENT
        else:
            fast = reading._fast
            if fast is None:
                fast = _fast_of(reading)
            headroom = _classify_us(reading, fast, now_us, oldest_us, five_hour_since_us, family)
        tier = headroom[0]
        if tier is _REFUSING:
            dropped.append(candidate)
            continue
        verdict = None
        last_failure_at = candidate[3]
        if last_failure_at is not None and refusal_blocks(candidate[5], family):
            verdict = _verdict(reading, headroom, now, last_failure_at, family, candidate[4])
            if verdict is None:
                last_resort.append(candidate)
                continue
        if tier is _MEASURED and verdict is not window_reset:
            if balanced:
                score, remaining, limiting = _balance_us(fast, now_us, five_hour_since_us, family)
                ranked = _new(Ranked, (candidate, _MEASURED, headroom, verdict, score, limiting))
                if remaining > ADMISSION_FLOOR:
                    scored.append(ranked)
                    scored_keys.append(-score)
                else:
                    spent.append(ranked)
                    spent_keys.append(-score)
                continue
            ranked = _new(Ranked, (candidate, _MEASURED, headroom, verdict, None, None))
            key = (headroom[6] or 0, candidate[2])  # a measured band is never None
            bucket = measured.get(key)
            if bucket is None:
                measured[key] = [ranked]
            else:
                bucket.append(ranked)
        else:
            unknown.append(_new(Ranked, (candidate, _UNKNOWN, headroom, verdict, None, None)))
    ordered: list[Ranked] = []
    if balanced:
        ordered.extend(_by_key(scored, scored_keys))
        ordered.extend(unknown)
        ordered.extend(_by_key(spent, spent_keys))
    for key in sorted(measured):
        ordered.extend(measured[key])
    if not balanced:
        ordered.extend(unknown)
    return Ranking(
        ranked=tuple(ordered),
        last_resort=tuple(last_resort),
        dropped=tuple(dropped),
    )


@dataclass(frozen=True)
class Selection:
    """The ranked alternatives, the last-resort ones, and why.

    ``fallback`` is empty when the ranking ran, else names why the DB order came
    back (``store_unreachable`` or ``ranking_failed``).
    """

    ranked: tuple[Ranked, ...]
    last_resort: tuple[Candidate, ...]
    dropped: tuple[Candidate, ...] = ()
    fallback: str = ""
    now: datetime | None = None

    @property
    def first(self) -> Ranked | None:
        return self.ranked[0] if self.ranked else None

    def order(self) -> list[int]:
        """Subscription ids in the order a walk should try them."""
        return [r.candidate.subscription_id for r in self.ranked] + [
            c.subscription_id for c in self.last_resort
        ]

    def reason(self, ranked: Ranked | None = None) -> dict[str, Any]:
        """Why ``ranked`` (default: the first) is where it is, for a switch to explain itself."""
        chosen = ranked or self.first
        headroom = chosen.headroom if chosen else NO_EVIDENCE
        age = headroom.age_seconds(self.now) if self.now is not None else None
        return {
            "subscription_id": chosen.candidate.subscription_id if chosen else None,
            "tier": chosen.tier.value if chosen else None,
            "readmitted": chosen.readmitted.value if chosen and chosen.readmitted else None,
            "five_hour": headroom.five_hour,
            "seven_day": headroom.seven_day,
            "band": headroom.band if chosen and chosen.tier is Tier.MEASURED else None,
            "score": round(chosen.score, 1) if chosen and chosen.score is not None else None,
            "limiting_window": chosen.limiting_window if chosen else None,
            "reading_age_seconds": int(age) if age is not None else None,
            "candidate_count": len(self.ranked),
            "last_resort_count": len(self.last_resort),
            "dropped_count": len(self.dropped),
            "fallback": self.fallback or None,
        }
