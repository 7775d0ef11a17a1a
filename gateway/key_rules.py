"""Who may change what on a gateway key: an admin anything, its owner only tighter.

A key's restrictions (its limits, allowed providers and model families, expiry) are
what an admin relies on when they hand a person a key. The owner may create their own
keys with whatever restrictions they like, and revoke them; on an existing key they
may only tighten: lower a limit or set one where there was none, narrow the providers
or families, bring the expiry forward. Raising or clearing any of these is an admin's.
The name is the owner's to change freely. Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

# The limits a key may carry (``gateway.keys.LIMIT_FIELDS``; None: no limit).
LIMITS: Final = (
    "requests_per_minute",
    "max_streams",
    "daily_tokens",
    "monthly_tokens",
    "daily_usd",
    "monthly_usd",
)
# The lists that narrow what a key may reach (empty: everything).
ALLOW_LISTS: Final = ("providers", "model_families")


def _limit_loosened(current: int | Decimal | None, new: int | Decimal | None) -> bool:
    if current is None:
        return False  # no limit yet: any limit is tighter, and None is the same
    return new is None or new > current


def _list_loosened(current: list[str], new: list[str]) -> bool:
    if not current:
        return False  # everything allowed: any list narrows it
    return not new or not set(new) <= set(current)


def _expiry_loosened(current: datetime | None, new: datetime | None) -> bool:
    if current is None:
        return False
    return new is None or new > current


def loosened_fields(current: Mapping[str, Any], changes: Mapping[str, Any]) -> list[str]:
    """The fields of ``changes`` that would loosen the key whose values are ``current``:
    a limit raised or cleared, a provider or family allowed that was not (an empty list
    allows all), an expiry moved later or cleared. Sorted; empty when every change
    keeps or tightens. Fields this module does not govern (the name) never loosen."""
    loosened = []
    for name, new in changes.items():
        if name in LIMITS:
            wider = _limit_loosened(current.get(name), new)
        elif name in ALLOW_LISTS:
            wider = _list_loosened(list(current.get(name) or []), list(new or []))
        elif name == "expires_at":
            wider = _expiry_loosened(current.get(name), new)
        else:
            wider = False
        if wider:
            loosened.append(name)
    return sorted(loosened)
