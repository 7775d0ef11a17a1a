"""A reading: what one usage probe saw of one subscription's quota windows.

Pure data, no Django and no Redis: the headroom rules, the collectors and the store
share it.
Every timestamp is an aware datetime; the JSON form (cache and history) carries ISO
strings, and ``reading_from_json`` is the one place they become datetimes again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple


class ReadingStatus(StrEnum):
    OK = "ok"
    RATE_LIMITED = "rate_limited"
    INVALID_TOKEN = "invalid_token"  # noqa: S105 - a status name, not a credential
    ERROR = "error"


FIVE_HOUR = "five_hour"
SEVEN_DAY = "seven_day"
# The windows every turn counts against, whatever its model.
CORE_WINDOWS = (FIVE_HOUR, SEVEN_DAY)
# The allowlist: any other status, including one we have never seen, blocks.
NON_BLOCKING_STATUSES = frozenset({"allowed", "allowed_warning"})
REJECTED = "rejected"
ALLOWED = "allowed"


class WindowReading(NamedTuple):
    """One quota window: utilization in percent (one decimal), its reset, its status.

    A NamedTuple: the store decodes thousands of these per ranking.
    """

    utilization: float | None
    resets_at: datetime | None
    status: str | None

    @property
    def blocking(self) -> bool:
        return self.status not in NON_BLOCKING_STATUSES


@dataclass(frozen=True, slots=True)
class Reading:
    """The outcome of one probe. ``detail`` is short and never holds a credential."""

    fetched_at: datetime
    status: ReadingStatus
    windows: Mapping[str, WindowReading] = field(default_factory=dict)
    source: str = ""
    reset_at: datetime | None = None
    representative_claim: str | None = None
    overage_status: str | None = None
    detail: str = ""
    # The ranking's precomputed form of this reading (``figures.Precomputed``: instants as
    # integer microseconds, per-window flags), built on first use and kept with the
    # reading: the store decodes a value once per process, so a ranking reads it, not
    # the datetimes. Derived data only: no part of equality, the repr or the encoded forms.
    _precomputed: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.fetched_at.tzinfo is None:
            raise ValueError("fetched_at must be an aware datetime")

    @property
    def answered(self) -> bool:
        """The provider answered about this credential (an ``error`` is no answer)."""
        return self.status is not ReadingStatus.ERROR

    def utilization(self, window: str) -> float | None:
        found = self.windows.get(window)
        return found.utilization if found is not None else None


def reading_replaces(prior: Reading | None, reading: Reading) -> bool:
    """Whether a new reading replaces the stored one: an ``error`` never replaces an
    answer (the answer stays evidence until it goes stale, and a limited reading keeps
    the reset a readmission needs)."""
    return reading.answered or prior is None or not prior.answered


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def parse_instant(value: Any) -> datetime | None:
    """An ISO instant from the JSON form back to an aware datetime (None stays None);
    raises ValueError for a naive or malformed one."""
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError("a stored instant has no timezone")
    return parsed


def window_to_json(window: WindowReading) -> dict[str, Any]:
    return {
        "utilization": window.utilization,
        "resets_at": _iso(window.resets_at),
        "status": window.status,
    }


def reading_to_json(reading: Reading) -> dict[str, Any]:
    """A JSON-safe dict (ISO strings for instants)."""
    return {
        "fetched_at": reading.fetched_at.isoformat(),
        "status": reading.status.value,
        "windows": {name: window_to_json(w) for name, w in reading.windows.items()},
        "source": reading.source,
        "reset_at": _iso(reading.reset_at),
        "representative_claim": reading.representative_claim,
        "overage_status": reading.overage_status,
        "detail": reading.detail,
    }


def reading_from_json(data: Mapping[str, Any]) -> Reading:
    """Parse ``reading_to_json`` output back; raises ValueError/KeyError/TypeError if malformed."""
    windows = {
        str(name): WindowReading(
            utilization=None if w["utilization"] is None else float(w["utilization"]),
            resets_at=parse_instant(w["resets_at"]),
            status=w["status"],
        )
        for name, w in dict(data["windows"]).items()
    }
    fetched_at = parse_instant(data["fetched_at"])
    if fetched_at is None:
        raise ValueError("a reading needs fetched_at")
    return Reading(
        fetched_at=fetched_at,
        status=ReadingStatus(data["status"]),
        windows=windows,
        source=str(data.get("source", "")),
        reset_at=parse_instant(data.get("reset_at")),
        representative_claim=data.get("representative_claim"),
        overage_status=data.get("overage_status"),
        detail=str(data.get("detail", "")),
    )


# The snapshot codec: the store's compact form of a reading. A string, so the store
# can key its decode memo on the stored bytes; instants as integer microseconds since
# the epoch (exact, and cheap to turn back into datetimes).

SNAPSHOT_PREFIX = "h2:"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def micros(value: datetime | None) -> int | None:
    """An aware instant as integer microseconds since the epoch (None stays None).

    Exact: integer microseconds compare as the instants do, whatever their tzinfo.
    """
    return (value - _EPOCH) // _MICROSECOND if value is not None else None


def instant(value: Any) -> datetime | None:
    """``micros``' inverse, in UTC (None stays None); raises TypeError for a non-integer."""
    if value is None:
        return None
    if type(value) is not int:
        raise TypeError("a stored instant is integer microseconds")
    return _EPOCH + timedelta(microseconds=value)


def reading_encode(reading: Reading) -> str:
    """The compact snapshot form (``SNAPSHOT_PREFIX`` + a JSON array)."""
    windows = [
        [name, w.utilization, micros(w.resets_at), w.status] for name, w in reading.windows.items()
    ]
    body = [
        micros(reading.fetched_at),
        reading.status.value,
        micros(reading.reset_at),
        windows,
        reading.source,
        reading.representative_claim,
        reading.overage_status,
        reading.detail,
    ]
    return SNAPSHOT_PREFIX + json.dumps(body, separators=(",", ":"))


def reading_decode(value: Any) -> Reading:
    """A stored snapshot back to a reading: the compact form, or the JSON dict the
    store wrote before it (``reading_to_json``), still in the store for up to its TTL.
    Raises ValueError/KeyError/TypeError if malformed."""
    if not isinstance(value, str):
        return reading_from_json(value)
    if not value.startswith(SNAPSHOT_PREFIX):
        raise ValueError("not a snapshot")
    fetched, status, reset, windows, source, claim, overage, detail = json.loads(
        value[len(SNAPSHOT_PREFIX) :]
    )
    fetched_at = instant(fetched)
    if fetched_at is None:
        raise ValueError("a reading needs fetched_at")
    # A cold read decodes every value (10,000 after a sweep): no enum call, no
    # per-field helper calls, tuples built directly.
    decoded_status = _STATUSES.get(status) if type(status) is str else None
    if decoded_status is None:
        raise ValueError(f"not a reading status: {status!r}")
    decoded: dict[str, WindowReading] = {}
    for name, utilization, resets, window_status in windows:
        if resets is not None and type(resets) is not int:
            raise TypeError("a stored instant is integer microseconds")
        decoded[str(name)] = _new(
            WindowReading,
            (
                None if utilization is None else float(utilization),
                None if resets is None else _EPOCH + _timedelta(microseconds=resets),
                None if window_status is None else str(window_status),
            ),
        )
    return Reading(
        fetched_at=fetched_at,
        status=decoded_status,
        windows=decoded,
        source=str(source),
        reset_at=instant(reset),
        representative_claim=claim,
        overage_status=overage,
        detail=str(detail),
    )


_STATUSES = {status.value: status for status in ReadingStatus}
_new = tuple.__new__
_timedelta = timedelta
