"""What the subscriptions tests share: the simulator as both providers' sign-in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from tests.conftest import sign_in_urls


@pytest.fixture
def sim(simulator: SimulatorProcess) -> Iterator[SimulatorControl]:
    """The simulator, reset, as the Claude and ChatGPT sign-in, token and refresh
    endpoints."""
    simulator.control.reset()
    with override_settings(
        TRINITY_CODEX_AUTH_URL=simulator.base_url, **sign_in_urls(simulator.base_url)
    ):
        yield simulator.control
