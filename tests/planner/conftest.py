"""The planner's tables touch no backend: no database, no cache."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _clear_cache() -> Iterator[None]:
    """Overrides the suite's cache reset: a pure table has no cache to clear."""
    yield
