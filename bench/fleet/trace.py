"""The fleet trace: the fleet on the first line, then one turn per line (JSON lines).

The format is documented in docs/benchmarks.md; ``trace_read`` is the one parser (of
versions 1 and 2) and ``trace_write`` the one writer (of version 2), and writing what
was read from a version-2 file gives the same bytes back. Every instant is an aware
ISO-8601 string; tokens are whole numbers.

The fleet line names the subscriptions (plan type; when it was added, revoked and
removed, and in version 2 the spans an admin paused it; per quota window its capacity,
its first reset and what was used of it when the trace starts or the plan is added),
the agents (model, assigned subscription) and
the platform key's prices (one blended ``key_usd_per_mtok`` and, in version 2,
``key_prices`` per model family). What a line leaves out has a default: a window's
capacity comes from its plan type (``PLAN_CAPACITY``), its first reset is one window
length after the start (after ``added_at`` for a plan added during the trace), and
nothing is used; ``utilization`` (percent, what a headroom reading carries) may stand
in for ``used``. A reset at or before that instant (an old reading) rolls forward by
whole windows and forgets its usage, as the provider would.

A turn line names its instant, agent, tokens, trigger and (when it differs from the
agent's) model; in version 2 it may list its ``requests`` as ``[offset_seconds,
tokens]`` pairs (a Claude Code turn is a loop of requests): offsets from 0, never
decreasing, the last before the trace's end, tokens summing to the turn's ``tokens``
(which may then be left out). A turn without requests is one request at its start.
Version 3 adds the prompt cache: a request may be ``[offset, tokens, cached]``, where
``cached`` is the prompt prefix it would read from a warm cache (``tokens`` are the
fresh input and the output), and the fleet line may carry ``cache`` weights: how much
one cache-read and one cache-write token count in a plan's windows. Whether a prefix
is read or written again is the world's to decide (a session that moved to another
credential writes it there). Version 1 has none of the version-2 fields, version 2
none of version 3's; a file that carries a later version's field is refused rather
than half read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

from simulator.state import DEFAULT_CAPACITY, WINDOW_DURATIONS, model_family

FORMAT_VERSION = 2
CACHE_VERSION = 3  # what a trace with prompt-cache fields is written as
VERSIONS = (1, 2, 3)
KEY = "platform API key"
INTERACTIVE_TRIGGERS = ("public", "chat", "api")
AUTONOMOUS_TRIGGERS = ("schedule", "agent", "mcp")
TRIGGERS = INTERACTIVE_TRIGGERS + AUTONOMOUS_TRIGGERS
PROVIDER = "anthropic"
FAMILIES = ("opus", "sonnet", "haiku")


def _scaled(factor: float) -> dict[str, int]:
    return {name: int(value * factor) for name, value in DEFAULT_CAPACITY.items()}


# Tokens per window by plan type. The provider publishes no token figures, only the
# ratios the plans are sold at: Max 5x is five times Pro's usage and Max 20x twenty
# times, so Pro : Max 5x : Max 20x = 1 : 5 : 20. Max 20x keeps the simulator's
# defaults (DEFAULT_CAPACITY); Team's standard seat is taken as Max 5x's and
# Enterprise as Max 20x's. An exported trace of a real install gets these unless it
# is edited.
PLAN_CAPACITY: dict[str, dict[str, int]] = {
    "max-20x": _scaled(1.0),
    "max-5x": _scaled(0.25),
    "team": _scaled(0.25),
    "enterprise": _scaled(1.0),
    "pro": _scaled(0.05),
}
DEFAULT_PLAN = "max-5x"
DEFAULT_KEY_USD_PER_MTOK = 5.0
# The key's list prices blended at Claude Code's mix (five input tokens to one
# output), $ per Mtok: Opus 4.1 $15/$75, Sonnet $3/$15, Haiku 4.5 $1/$5.
LIST_PRICES: dict[str, float] = {"opus": 25.0, "sonnet": 5.0, "haiku": 5.0 / 3}
# The key bills a cache read at a tenth of its input price and a cache write
# (5-minute cache) at 1.25 times it (the provider's list multipliers).
CACHE_READ_PRICE = 0.1
CACHE_WRITE_PRICE = 1.25
# What one cached token counts in a plan's windows when the trace does not say.
DEFAULT_CACHE_WEIGHTS = {"read": 0.1, "write": 1.25}


class TraceError(ValueError):
    """A trace file that does not follow the format; the message names the line."""


@dataclass(frozen=True)
class WindowSpec:
    """One quota window of a subscription at the trace start.

    ``first_reset`` is the first reset after the start: the window in force at the
    start began one window length before it and had ``used`` tokens spent.
    """

    capacity: int
    first_reset: datetime
    used: int = 0


@dataclass(frozen=True)
class SubscriptionSpec:
    """One plan. ``added_at``: registered during the trace (None: from its start; its
    windows' ``first_reset`` is then the first reset after ``added_at``).
    ``revoked_at``: the provider refuses its token from then on (an auth refusal).
    ``removed_at``: the operator deleted it; from then on it is no candidate at all.
    ``paused``: the spans ``[since, until)`` an admin paused it (``until`` None: to the
    end): it stays registered, and no turn may start on it or walk to it meanwhile."""

    name: str
    plan_type: str
    windows: Mapping[str, WindowSpec]
    revoked_at: datetime | None = None
    provider: str = PROVIDER
    added_at: datetime | None = None
    removed_at: datetime | None = None
    paused: tuple[tuple[datetime, datetime | None], ...] = ()

    def present(self, at: datetime) -> bool:
        """Whether the plan is registered at ``at`` (added and not yet removed)."""
        if self.added_at is not None and at < self.added_at:
            return False
        return self.removed_at is None or at < self.removed_at

    def paused_at(self, at: datetime) -> bool:
        """Whether an admin has the plan paused at ``at``."""
        return any(since <= at and (until is None or at < until) for since, until in self.paused)


@dataclass(frozen=True)
class AgentSpec:
    name: str
    model: str
    subscription: str | None


@dataclass(frozen=True)
class Fleet:
    name: str
    start: datetime
    end: datetime
    subscriptions: tuple[SubscriptionSpec, ...]
    agents: tuple[AgentSpec, ...]
    key_usd_per_mtok: float = DEFAULT_KEY_USD_PER_MTOK
    seed: int | None = None
    description: str = ""
    # The key's price per model family ("opus", "sonnet", "haiku"), $ per Mtok; a
    # family not listed bills at ``key_usd_per_mtok``.
    key_prices: Mapping[str, float] = field(default_factory=dict)
    # What one cache-read / cache-write token counts in a plan's windows (version 3).
    cache_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_CACHE_WEIGHTS))

    def agent(self, name: str) -> AgentSpec:
        for agent in self.agents:
            if agent.name == name:
                return agent
        raise KeyError(name)

    def key_price(self, model: str) -> float:
        """The key's price for ``model``, $ per Mtok."""
        family = model_family(model)
        if family is None:
            return self.key_usd_per_mtok
        return self.key_prices.get(family, self.key_usd_per_mtok)

    def counted(self, request: Request, *, warm: bool) -> int:
        """What ``request`` counts in a plan's windows: its fresh tokens, plus its cached
        prefix read (``warm``) or written again, at the trace's weights."""
        if not request.cached:
            return request.tokens
        weight = self.cache_weights["read" if warm else "write"]
        return request.tokens + math.ceil(request.cached * weight)

    def key_usd(self, model: str, request: Request, *, warm: bool) -> float:
        """What the key bills for ``request`` on ``model``: fresh tokens at the list
        price, the cached prefix at the read or write multiplier."""
        multiplier = CACHE_READ_PRICE if warm else CACHE_WRITE_PRICE
        return self.key_price(model) * (request.tokens + request.cached * multiplier) / 1e6

    @property
    def cached(self) -> bool:
        """Whether the trace carries prompt-cache fields (written as version 3)."""
        return self.cache_weights != DEFAULT_CACHE_WEIGHTS


@dataclass(frozen=True)
class Request:
    """One request of a turn: ``offset`` seconds after the turn starts, its fresh
    tokens (input not read from the cache, and output), and ``cached``: the prompt
    prefix it reads from a warm cache, or writes again on a cold one."""

    offset: float
    tokens: int
    cached: int = 0


@dataclass(frozen=True)
class Turn:
    """One turn: when it arrives, whose it is, how many tokens it spends, its trigger.

    A turn is a loop of requests (``requests``, offsets ascending from 0, tokens
    summing to ``tokens``); left empty it is one request of ``tokens`` at its start
    (a version-1 turn). ``model`` is set only when the turn ran on another model than
    its agent's.
    """

    at: datetime
    agent: str
    tokens: int
    trigger: str
    model: str | None = None
    requests: tuple[Request, ...] = ()

    @property
    def autonomous(self) -> bool:
        return self.trigger in AUTONOMOUS_TRIGGERS

    @property
    def parts(self) -> tuple[Request, ...]:
        """The turn's requests (one of all its tokens when none are given)."""
        return self.requests or (Request(0.0, self.tokens),)

    @property
    def ends_at(self) -> datetime:
        """The instant of the turn's last request."""
        return self.at + timedelta(seconds=self.parts[-1].offset)


@dataclass(frozen=True)
class Trace:
    fleet: Fleet
    turns: tuple[Turn, ...] = field(default_factory=tuple)

    def model_of(self, turn: Turn) -> str:
        return turn.model or self.fleet.agent(turn.agent).model


# Reading


def _instant(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise TraceError(f"{where}: expected an ISO-8601 instant, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise TraceError(f"{where}: not an ISO-8601 instant: {value!r}") from None
    if parsed.tzinfo is None:
        raise TraceError(f"{where}: the instant {value!r} has no timezone")
    return parsed


def _optional_instant(value: Any, where: str) -> datetime | None:
    return None if value is None else _instant(value, where)


def _count(value: Any, where: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TraceError(f"{where}: expected a whole number >= {minimum}, got {value!r}")
    return value


def _window(
    name: str, raw: Mapping[str, Any], *, plan_type: str, start: datetime, where: str
) -> WindowSpec:
    """One window as it stands at ``start`` (the trace's, or the plan's ``added_at``)."""
    if name not in WINDOW_DURATIONS:
        raise TraceError(f"{where}: unknown window {name!r}")
    duration = timedelta(seconds=WINDOW_DURATIONS[name])
    plan = PLAN_CAPACITY.get(plan_type, PLAN_CAPACITY[DEFAULT_PLAN])
    capacity = _count(raw.get("capacity", plan[name]), f"{where}.capacity", minimum=1)
    first_reset = _optional_instant(raw.get("resets_at"), f"{where}.resets_at")
    if "used" in raw:
        used = _count(raw["used"], f"{where}.used")
    elif raw.get("utilization") is not None:
        utilization = raw["utilization"]
        if isinstance(utilization, bool) or not isinstance(utilization, int | float):
            raise TraceError(f"{where}.utilization: expected a percentage, got {utilization!r}")
        used = max(0, math.ceil(capacity * float(utilization) / 100))
    else:
        used = 0
    if first_reset is None:
        first_reset = start + duration
    elif first_reset <= start:
        # An old reading: that window and its usage are gone; the next starts on phase.
        periods = (start - first_reset) // duration + 1
        first_reset, used = first_reset + periods * duration, 0
    elif first_reset > start + duration:
        raise TraceError(f"{where}.resets_at: more than one window length after {start}")
    return WindowSpec(capacity=capacity, first_reset=first_reset, used=used)


def _span_instant(
    raw: Mapping[str, Any], name: str, span: tuple[datetime, datetime], where: str
) -> datetime | None:
    """The optional instant ``raw[name]``, which must fall in the trace's span."""
    at = _optional_instant(raw.get(name), f"{where}.{name}")
    if at is not None and not span[0] <= at < span[1]:
        raise TraceError(f"{where}.{name}: outside the trace's [start, end)")
    return at


def _lifetime(
    raw: Mapping[str, Any], span: tuple[datetime, datetime], version: int, where: str
) -> tuple[datetime | None, datetime | None, datetime | None]:
    """The plan's ``added_at``, ``revoked_at``, ``removed_at``, checked against each other."""
    if version < 2:
        for name in ("added_at", "removed_at"):
            if name in raw:
                raise TraceError(f"{where}.{name}: a version-2 field in a version-1 trace")
    added = _span_instant(raw, "added_at", span, where)
    removed = _span_instant(raw, "removed_at", span, where)
    revoked = _optional_instant(raw.get("revoked_at"), f"{where}.revoked_at")
    if added is not None and revoked is not None and revoked < added:
        raise TraceError(f"{where}.revoked_at: before the plan's added_at")
    if added is not None and removed is not None and removed <= added:
        raise TraceError(f"{where}.removed_at: not after the plan's added_at")
    return added, revoked, removed


def _subscription(
    raw: Any, *, span: tuple[datetime, datetime], version: int, where: str
) -> SubscriptionSpec:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise TraceError(f"{where}: a subscription needs a name")
    plan_type = str(raw.get("plan_type") or DEFAULT_PLAN)
    provider = str(raw.get("provider") or PROVIDER)
    if provider != PROVIDER:
        raise TraceError(f"{where}: only {PROVIDER!r} subscriptions are simulated")
    given = raw.get("windows") or {}
    if not isinstance(given, dict):
        raise TraceError(f"{where}.windows: expected an object")
    added_at, revoked_at, removed_at = _lifetime(raw, span, version, where)
    paused = _pauses(raw.get("paused"), span, version, where)
    start = added_at or span[0]
    windows = {
        name: _window(
            name, given.get(name) or {}, plan_type=plan_type, start=start, where=f"{where}.{name}"
        )
        for name in WINDOW_DURATIONS
    }
    for name in given:
        if name not in WINDOW_DURATIONS:
            raise TraceError(f"{where}.windows: unknown window {name!r}")
    return SubscriptionSpec(
        name=raw["name"],
        plan_type=plan_type,
        windows=windows,
        revoked_at=revoked_at,
        provider=provider,
        added_at=added_at,
        removed_at=removed_at,
        paused=paused,
    )


def _pauses(
    raw: Any, span: tuple[datetime, datetime], version: int, where: str
) -> tuple[tuple[datetime, datetime | None], ...]:
    """The plan's pauses: ``[[since, until], ...]`` (``until`` null: to the end), in the
    trace's span, in order, none overlapping the next."""
    if raw is None:
        return ()
    if version < 2:
        raise TraceError(f"{where}.paused: a version-2 field in a version-1 trace")
    if not isinstance(raw, list):
        raise TraceError(f"{where}.paused: expected a list of [since, until] pairs")
    found: list[tuple[datetime, datetime | None]] = []
    for i, pair in enumerate(raw):
        here = f"{where}.paused[{i}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise TraceError(f"{here}: expected [since, until]")
        since = _instant(pair[0], f"{here}[0]")
        until = _optional_instant(pair[1], f"{here}[1]")
        if not span[0] <= since < span[1]:
            raise TraceError(f"{here}: outside the trace's [start, end)")
        if until is not None and until <= since:
            raise TraceError(f"{here}: until is not after since")
        previous = found[-1][1] if found else None
        if found and (previous is None or since < previous):
            raise TraceError(f"{here}: starts before the previous pause ends")
        found.append((since, until))
    return tuple(found)


def _fleet(raw: Any) -> Fleet:
    where = "line 1"
    if not isinstance(raw, dict) or raw.get("type") != "fleet":
        raise TraceError(f"{where}: the first line must be the fleet ({{'type': 'fleet', ...}})")
    version = raw.get("version")
    if isinstance(version, bool) or version not in VERSIONS:
        raise TraceError(f"{where}: unsupported version {version!r}")
    start = _instant(raw.get("start"), f"{where}.start")
    end = _instant(raw.get("end"), f"{where}.end")
    if end <= start:
        raise TraceError(f"{where}: end must be after start")
    subscriptions = tuple(
        _subscription(s, span=(start, end), version=version, where=f"{where}.subscriptions[{i}]")
        for i, s in enumerate(raw.get("subscriptions") or [])
    )
    names = [s.name for s in subscriptions]
    if len(set(names)) != len(names):
        raise TraceError(f"{where}: subscription names must be unique")
    agents = []
    for i, a in enumerate(raw.get("agents") or []):
        if not isinstance(a, dict) or not isinstance(a.get("name"), str) or not a["name"]:
            raise TraceError(f"{where}.agents[{i}]: an agent needs a name")
        if not isinstance(a.get("model"), str) or not a["model"]:
            raise TraceError(f"{where}.agents[{i}]: an agent needs a model")
        assigned = a.get("subscription")
        if assigned is not None and assigned not in names:
            raise TraceError(f"{where}.agents[{i}]: unknown subscription {assigned!r}")
        if assigned is not None and not subscriptions[names.index(assigned)].present(start):
            raise TraceError(f"{where}.agents[{i}]: {assigned!r} is not registered at the start")
        agents.append(AgentSpec(a["name"], a["model"], assigned))
    if len({a.name for a in agents}) != len(agents):
        raise TraceError(f"{where}: agent names must be unique")
    price = _price(
        raw.get("key_usd_per_mtok", DEFAULT_KEY_USD_PER_MTOK), f"{where}.key_usd_per_mtok"
    )
    seed = raw.get("seed")
    if seed is not None:
        seed = _count(seed, f"{where}.seed")
    if version < 2 and "key_prices" in raw:
        raise TraceError(f"{where}.key_prices: a version-2 field in a version-1 trace")
    if version < CACHE_VERSION and "cache" in raw:
        raise TraceError(f"{where}.cache: a version-3 field in a version-{version} trace")
    return Fleet(
        name=str(raw.get("name") or "trace"),
        start=start,
        end=end,
        subscriptions=subscriptions,
        agents=tuple(agents),
        key_usd_per_mtok=price,
        seed=seed,
        description=str(raw.get("description") or ""),
        key_prices=_key_prices(raw.get("key_prices", {}), f"{where}.key_prices"),
        cache_weights=_cache_weights(raw.get("cache", DEFAULT_CACHE_WEIGHTS), f"{where}.cache"),
    )


def _cache_weights(raw: Any, where: str) -> dict[str, float]:
    """``{"read": w, "write": w}``: what one cached token counts in a window."""
    if not isinstance(raw, dict) or set(raw) != set(DEFAULT_CACHE_WEIGHTS):
        raise TraceError(f"{where}: expected {{'read': weight, 'write': weight}}")
    return {name: _price(raw[name], f"{where}.{name}") for name in DEFAULT_CACHE_WEIGHTS}


def _finite(value: Any) -> bool:
    """A JSON number that is not NaN or infinite (``json`` reads both)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _price(value: Any, where: str) -> float:
    if not _finite(value) or value < 0:
        raise TraceError(f"{where}: expected a price >= 0, got {value!r}")
    return float(value)


def _key_prices(raw: Any, where: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise TraceError(f"{where}: expected an object of model family -> $ per Mtok")
    unknown = sorted(set(raw) - set(FAMILIES))
    if unknown:
        raise TraceError(f"{where}: unknown model family {unknown[0]!r} (known: {FAMILIES})")
    return {
        family: _price(raw[family], f"{where}.{family}") for family in FAMILIES if family in raw
    }


def _requests(
    raw: Any, at: datetime, end: datetime, version: int, where: str
) -> tuple[Request, ...]:
    """A turn's ``[offset_seconds, tokens]`` pairs (version 3: ``[offset, tokens,
    cached]``): from 0, never decreasing, the last before ``end``."""
    if not isinstance(raw, list) or not raw:
        raise TraceError(f"{where}: expected a non-empty list of [offset_seconds, tokens]")
    requests: list[Request] = []
    for i, pair in enumerate(raw):
        here = f"{where}[{i}]"
        if not isinstance(pair, list) or len(pair) not in (2, 3):
            raise TraceError(f"{here}: expected [offset_seconds, tokens], got {pair!r}")
        if len(pair) == 3 and version < CACHE_VERSION:
            raise TraceError(f"{here}: a cached count is a version-3 field")
        offset = pair[0]
        if not _finite(offset) or offset < 0:
            raise TraceError(f"{here}: the offset must be seconds >= 0, got {offset!r}")
        previous = requests[-1].offset if requests else 0.0
        if (not requests and offset != 0) or offset < previous:
            raise TraceError(f"{here}: offsets start at 0 and never decrease, got {offset!r}")
        cached = _count(pair[2], f"{here}.cached") if len(pair) == 3 else 0
        tokens = _count(pair[1], f"{here}.tokens", minimum=1)
        requests.append(Request(float(offset), tokens, cached))
    if at + timedelta(seconds=requests[-1].offset) >= end:
        raise TraceError(f"{where}: the last request is not before the trace's end")
    return tuple(requests)


def _spent(
    raw: Mapping[str, Any], at: datetime, end: datetime, version: int, where: str
) -> tuple[int, tuple[Request, ...]]:
    """A turn's tokens and its requests (none: one request of all of them)."""
    if "requests" not in raw:
        return _count(raw.get("tokens"), f"{where}.tokens", minimum=1), ()
    if version < 2:
        raise TraceError(f"{where}.requests: a version-2 field in a version-1 trace")
    requests = _requests(raw["requests"], at, end, version, f"{where}.requests")
    total = sum(r.tokens for r in requests)
    if "tokens" in raw and _count(raw["tokens"], f"{where}.tokens", minimum=1) != total:
        raise TraceError(f"{where}.tokens: {raw['tokens']} is not its requests' sum {total}")
    return total, requests


def _turn(raw: Any, fleet: Fleet, version: int, agents: set[str], where: str) -> Turn:
    if not isinstance(raw, dict) or raw.get("type") != "turn":
        raise TraceError(f"{where}: expected a turn ({{'type': 'turn', ...}})")
    at = _instant(raw.get("at"), f"{where}.at")
    if not fleet.start <= at < fleet.end:
        raise TraceError(f"{where}.at: outside the trace's [start, end)")
    agent = raw.get("agent")
    if agent not in agents:
        raise TraceError(f"{where}.agent: unknown agent {agent!r}")
    trigger = raw.get("trigger", "api")
    if trigger not in TRIGGERS:
        raise TraceError(f"{where}.trigger: unknown trigger {trigger!r}")
    model = raw.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        raise TraceError(f"{where}.model: expected a model name")
    tokens, requests = _spent(raw, at, fleet.end, version, where)
    return Turn(at, str(agent), tokens, str(trigger), model, requests)


def trace_parse(lines: Iterable[str]) -> Trace:
    """Parse a trace (version 1 or 2) from its lines; raises TraceError naming the first
    bad line.

    Turns come back ordered by time, ties in file order.
    """
    fleet: Fleet | None = None
    version = FORMAT_VERSION
    agents: set[str] = set()
    turns: list[Turn] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except ValueError:
            raise TraceError(f"line {number}: not JSON") from None
        if fleet is None:
            fleet, version = _fleet(raw), raw["version"]
            agents = {a.name for a in fleet.agents}
            continue
        turns.append(_turn(raw, fleet, version, agents, f"line {number}"))
    if fleet is None:
        raise TraceError("empty trace: the first line must be the fleet")
    turns.sort(key=lambda t: t.at)  # stable: ties keep the file's order
    return Trace(fleet=fleet, turns=tuple(turns))


def trace_read(path: str | Path) -> Trace:
    with Path(path).open(encoding="utf-8") as handle:
        return trace_parse(handle)


# Writing


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _seconds(offset: float) -> float | int:
    """Whole seconds as an integer: ``[12, 3400]`` rather than ``[12.0, 3400]``."""
    return int(offset) if offset.is_integer() else offset


def _version(trace: Trace) -> int:
    """Version 3 when the trace carries prompt-cache fields, else version 2 (so a
    version-2 file keeps its bytes)."""
    uses_cache = trace.fleet.cached or any(r.cached for t in trace.turns for r in t.requests)
    return CACHE_VERSION if uses_cache else FORMAT_VERSION


def fleet_json(fleet: Fleet, version: int = FORMAT_VERSION) -> dict[str, Any]:
    cache = {"cache": dict(fleet.cache_weights)} if version >= CACHE_VERSION else {}
    return {
        "type": "fleet",
        "version": version,
        **cache,
        "name": fleet.name,
        "description": fleet.description,
        "seed": fleet.seed,
        "start": fleet.start.isoformat(),
        "end": fleet.end.isoformat(),
        "key_usd_per_mtok": fleet.key_usd_per_mtok,
        "key_prices": {f: fleet.key_prices[f] for f in FAMILIES if f in fleet.key_prices},
        "subscriptions": [
            {
                "name": s.name,
                "provider": s.provider,
                "plan_type": s.plan_type,
                "added_at": _iso(s.added_at),
                "revoked_at": _iso(s.revoked_at),
                "removed_at": _iso(s.removed_at),
                # Only where there are some: a trace without pauses keeps its bytes.
                **({"paused": [[_iso(a), _iso(b)] for a, b in s.paused]} if s.paused else {}),
                "windows": {
                    name: {
                        "capacity": w.capacity,
                        "resets_at": w.first_reset.isoformat(),
                        "used": w.used,
                    }
                    for name, w in s.windows.items()
                },
            }
            for s in fleet.subscriptions
        ],
        "agents": [
            {"name": a.name, "model": a.model, "subscription": a.subscription} for a in fleet.agents
        ],
    }


def turn_json(turn: Turn) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": "turn",
        "at": turn.at.isoformat(),
        "agent": turn.agent,
        "tokens": turn.tokens,
        "trigger": turn.trigger,
    }
    if turn.model is not None:
        line["model"] = turn.model
    if turn.requests:
        line["requests"] = [
            [_seconds(r.offset), r.tokens, *([r.cached] if r.cached else [])] for r in turn.requests
        ]
    return line


def trace_dump(trace: Trace, handle: IO[str]) -> None:
    fleet = fleet_json(trace.fleet, _version(trace))
    handle.write(json.dumps(fleet, separators=(",", ":")) + "\n")
    for turn in trace.turns:
        handle.write(json.dumps(turn_json(turn), separators=(",", ":")) + "\n")


def trace_write(trace: Trace, path: str | Path) -> None:
    with Path(path).open("w", encoding="utf-8") as handle:
        trace_dump(trace, handle)


def with_turns(trace: Trace, turns: Iterable[Turn]) -> Trace:
    return replace(trace, turns=tuple(sorted(turns, key=lambda t: t.at)))
