"""The sign-in failure counts: what is counted, per what, and when a count refuses.

Every count is a list of recent failures in the shared cache (Redis or the database
cache, so every web process counts together), over a sliding window of
``WINDOW_SECONDS``; ``TRINITY_SIGN_IN_FAILURES_PER_MINUTE`` (10) is the limit of each.
Past it, the next attempt on that count is refused before its credential is checked.

Whose failure fills a count decides whom it may refuse. An address is shared (agents
of the local runtime and the operators on 127.0.0.1; every client behind a proxy that
``TRINITY_TRUSTED_PROXIES`` does not name), and anyone can send failures in anyone's
name, so:

- **pair** (this address, this account): only that account's failures from that
  address fill it; it refuses that account there, always. The one count that holds a
  guesser who shares the account holder's own address (nothing tells the two apart).
- **account**: that account's failures from anywhere (a guess spread over addresses);
  it refuses the account only at addresses it has not signed in from in the last
  ``KNOWN_SECONDS`` (30 days).
- **address**: the *distinct accounts* that failed from that address (a password
  sprayed over many names); one person's typos are one account and never fill it. It
  refuses only accounts that have not signed in from that address in 30 days, so the
  people who work there keep signing in while the spray moves to no new name.
- **token address**: wrong API tokens from that address. A token names nobody until it
  matches, so it refuses only tokens that have not authenticated from that address in
  30 days (known by their key's first 15 characters, about 60 random bits a guesser
  does not have; the rest of the token is still checked).

The rules are pure (``refusal_wait`` takes ``now``); the store functions read every
count an attempt needs in one round trip. Like DRF's throttles, a record is read and
written without a lock: racing failures may undercount by the number of concurrent
ones. A cache that does not answer lets the attempt through, said in a warning.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60
# How long an address (a token) a user signed in from (authenticated from) stays theirs.
KNOWN_SECONDS = 30 * 24 * 3600
# A known token's mark is rewritten at most this often (one write a day, not per request).
KNOWN_REFRESH_SECONDS = 24 * 3600
# A stored history never grows past this, whatever a race or a spray did.
HISTORY_MAX = 200

Entry = tuple[float, str]  # (when, whose: an account's digest; "" in a one-account count)


def _digest(*parts: str) -> str:
    # Hashed: a username may hold anything, and the cache needs no copy of it.
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def account_of(username: str) -> str:
    return _digest("account", username.casefold())


def pair_key(address: str, username: str) -> str:
    return f"sign_in:pair:{_digest(address, username.casefold())}"


def account_key(username: str) -> str:
    return f"sign_in:account:{account_of(username)}"


def address_key(address: str) -> str:
    return f"sign_in:address:{_digest(address)}"


def token_address_key(address: str) -> str:
    return f"sign_in:token-address:{_digest(address)}"


def known_address_key(username: str, address: str) -> str:
    return f"sign_in:known-address:{_digest(username.casefold(), address)}"


def known_token_key(token_key: str, address: str) -> str:
    return f"sign_in:known-token:{_digest(token_key, address)}"


def limit() -> int:
    return int(settings.TRINITY_SIGN_IN_FAILURES_PER_MINUTE)


# The rules (pure)


def recent(stored: object, *, now: float, window: float = WINDOW_SECONDS) -> list[Entry]:
    """The entries of a stored history still inside the window (``when > now - window``),
    newest first; anything malformed is dropped (a value this module did not write)."""
    if not isinstance(stored, list):
        return []
    found: list[Entry] = []
    for item in stored:
        if (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], int | float)
            and isinstance(item[1], str)
            and item[0] > now - window
        ):
            found.append((float(item[0]), item[1]))
    return sorted(found, reverse=True)


def refusal_wait(
    entries: Sequence[Entry],
    *,
    now: float,
    limit: int,
    distinct: bool = False,
    window: float = WINDOW_SECONDS,
) -> float | None:
    """Seconds until this count is below ``limit`` again (at least 1), or None when it
    already is. ``distinct`` counts whose failures, not failures (the latest of each)."""
    stamps = [when for when, _ in entries]
    if distinct:
        latest: dict[str, float] = {}
        for when, whose in entries:
            latest[whose] = max(when, latest.get(whose, when))
        stamps = sorted(latest.values(), reverse=True)
    if len(stamps) < limit:
        return None
    # Below the limit once the limit-th newest has left the window.
    return max(1.0, stamps[limit - 1] + window - now)


def recorded(stored: object, *, whose: str, now: float) -> list[list[Any]]:
    """The history to store after one more failure (JSON: a list of [when, whose])."""
    kept = [[when, who] for when, who in recent(stored, now=now)]
    return [[now, whose], *kept][:HISTORY_MAX]


def known_is_fresh(stored: object, *, now: float) -> bool:
    """Whether a known mark (the instant it was written) needs no rewrite yet."""
    return isinstance(stored, int | float) and now - stored < KNOWN_REFRESH_SECONDS


# The store


@dataclass(frozen=True)
class Counts:
    """What the cache held for one attempt's keys (None: the cache did not answer)."""

    values: Mapping[str, Any] | None

    def entries(self, key: str, *, now: float) -> list[Entry]:
        return recent((self.values or {}).get(key), now=now)

    def holds(self, key: str) -> bool:
        return self.values is not None and key in self.values


def counts_read(keys: Iterable[str]) -> Counts:
    """Every count and mark an attempt needs, in one round trip."""
    try:
        return Counts(cache.get_many(list(keys)))
    except Exception:  # the cache is down: fail open, said out loud
        logger.warning("sign-in throttle: the cache did not answer; not throttling")
        return Counts(None)


def failures_record(counts: Counts, failures: Mapping[str, str], *, now: float) -> None:
    """Add one failure to each count in ``failures`` (key -> whose), from ``counts``
    as read before the attempt."""
    values = counts.values or {}
    try:
        cache.set_many(
            {
                key: recorded(values.get(key), whose=whose, now=now)
                for key, whose in failures.items()
            },
            WINDOW_SECONDS,
        )
    except Exception:
        logger.warning("sign-in throttle: the cache did not answer; failure not counted")


def known_remember(key: str, *, now: float) -> None:
    """Mark an address (a token) as one the user signed in from, for ``KNOWN_SECONDS``."""
    try:
        cache.set(key, now, KNOWN_SECONDS)
    except Exception:
        logger.warning("sign-in throttle: the cache did not answer; address not remembered")
