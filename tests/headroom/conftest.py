"""Headroom fixtures: one real simulator for the suite, reset and pointed at per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import time_machine
from pytest_django.fixtures import Settings

from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from tests.conftest import simulator  # noqa: F401 - re-exported: one simulator per package
from tests.headroom.readings import T0


@pytest.fixture
def sim(simulator: SimulatorProcess, settings: Settings) -> SimulatorControl:
    """The simulator, reset, frozen at T0, and set as both providers' upstream."""
    control = simulator.control
    control.reset()
    control.set_clock(T0)
    settings.TRINITY_ANTHROPIC_BASE_URL = simulator.base_url
    settings.TRINITY_CODEX_BASE_URL = simulator.base_url
    return control


@pytest.fixture
def at_t0() -> Iterator[time_machine.Traveller]:
    """This process's clock frozen at T0, the simulator's instant."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller
