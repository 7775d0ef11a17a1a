"""Who may loosen a key: the operator's rule as a table, boundaries included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from gateway import key_rules, keys

T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)


def test_the_rules_govern_exactly_the_keys_changeable_restrictions() -> None:
    assert key_rules.LIMITS == keys.LIMIT_FIELDS
    governed = {"expires_at", *key_rules.ALLOW_LISTS, *key_rules.LIMITS}
    assert set(keys.CHANGEABLE) - governed == {"name"}


@pytest.mark.parametrize(
    ("field", "current", "new", "loosens"),
    [
        # limits: lower or equal keeps; higher or None loosens; None before: anything
        ("daily_tokens", 1000, 999, False),
        ("daily_tokens", 1000, 1000, False),
        ("daily_tokens", 1000, 1001, True),
        ("daily_tokens", 1000, None, True),
        ("daily_tokens", None, 10**12, False),
        ("daily_tokens", None, None, False),
        ("requests_per_minute", 60, 61, True),
        ("max_streams", 2, 1, False),
        ("monthly_tokens", 5, None, True),
        ("daily_usd", Decimal("5.00"), Decimal("5.0000"), False),
        ("daily_usd", Decimal("5.00"), Decimal("5.0001"), True),
        ("monthly_usd", Decimal("50"), Decimal("49.99"), False),
        # allow-lists: empty allows everything
        ("providers", [], ["anthropic"], False),
        ("providers", [], [], False),
        ("providers", ["anthropic"], [], True),
        ("providers", ["anthropic"], ["anthropic", "openai-codex"], True),
        ("providers", ["anthropic", "openai-codex"], ["openai-codex"], False),
        ("model_families", ["opus", "sonnet"], ["sonnet", "opus"], False),
        ("model_families", ["sonnet"], ["haiku"], True),
        # expiry: earlier keeps, later or cleared loosens, none before: anything
        ("expires_at", T0, T0 - timedelta(seconds=1), False),
        ("expires_at", T0, T0, False),
        ("expires_at", T0, T0 + timedelta(seconds=1), True),
        ("expires_at", T0, None, True),
        ("expires_at", None, T0, False),
        # the name is the owner's
        ("name", "laptop", "desktop", False),
    ],
)
def test_a_change_loosens_only_when_it_raises_widens_or_clears(
    field: str, current: Any, new: Any, loosens: bool
) -> None:
    found = key_rules.loosened_fields({field: current}, {field: new})
    assert found == ([field] if loosens else [])


def test_every_loosened_field_is_named_sorted() -> None:
    current = {"monthly_usd": Decimal(1), "daily_tokens": 5, "providers": ["anthropic"]}
    changes: dict[str, Any] = {"monthly_usd": None, "daily_tokens": 4, "providers": [], "name": "x"}
    assert key_rules.loosened_fields(current, changes) == ["monthly_usd", "providers"]
