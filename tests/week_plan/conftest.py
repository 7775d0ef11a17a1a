"""The week plan's tests: this process's clock at T0 (time-machine), a real database
and the configured cache (Redis when REDIS_URL is set)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import time_machine

from tests.headroom.readings import T0


@pytest.fixture
def at_t0() -> Iterator[time_machine.Traveller]:
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller
