"""One real simulator subprocess for the whole suite, reset before every test."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx
import pytest

from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from tests.conftest import simulator  # noqa: F401 - re-exported: one simulator per package

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


class PostMessage(Protocol):
    def __call__(
        self,
        *,
        token: str | None = None,
        api_key: str | None = None,
        model: str = "claude-sonnet-4-5",
        text: str = "hello there",
        stream: bool = False,
        path: str = "/v1/messages?beta=true",
    ) -> httpx.Response: ...


@pytest.fixture
def sim(simulator: SimulatorProcess) -> SimulatorProcess:
    """The suite's simulator (tests/conftest.py), reset."""
    simulator.control.reset()
    return simulator


@pytest.fixture
def control(sim: SimulatorProcess) -> SimulatorControl:
    return sim.control


@pytest.fixture
def frozen(control: SimulatorControl) -> datetime:
    """Freeze the simulator clock at T0 so resets are exact."""
    control.set_clock(T0)
    return T0


@pytest.fixture
def api(sim: SimulatorProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.base_url, timeout=10.0) as client:
        yield client


@pytest.fixture
def post_message(api: httpx.Client) -> PostMessage:
    def post(
        *,
        token: str | None = None,
        api_key: str | None = None,
        model: str = "claude-sonnet-4-5",
        text: str = "hello there",
        stream: bool = False,
        path: str = "/v1/messages?beta=true",
    ) -> httpx.Response:
        headers = {"anthropic-version": "2023-06-01"}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
            headers["anthropic-beta"] = "oauth-2025-04-20"
        if api_key is not None:
            headers["x-api-key"] = api_key
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": 1024,
            "stream": stream,
            "messages": [{"role": "user", "content": text}],
        }
        return api.post(path, headers=headers, json=body)

    return post
