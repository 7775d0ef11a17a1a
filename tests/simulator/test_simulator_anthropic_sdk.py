"""The official ``anthropic`` SDK against the simulator, as the agent server's direct
Messages runtime would use it."""

from __future__ import annotations

import anthropic
import pytest

from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess

OAUTH = "sk-ant-oat01-sdk-0000-aaaa"
API_KEY = "sk-ant-api03-sdk-key-0000-kkkk"


def plan_client(sim: SimulatorProcess, **kwargs: object) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=sim.base_url,
        auth_token=OAUTH,
        default_headers={"anthropic-beta": "oauth-2025-04-20"},
        timeout=10.0,
        **kwargs,  # type: ignore[arg-type]
    )


def test_the_sdk_creates_a_message(sim: SimulatorProcess) -> None:
    with plan_client(sim) as client:
        message = client.messages.create(
            model="claude-sonnet-5",
            max_tokens=256,
            messages=[{"role": "user", "content": "ping from the sdk"}],
        )

    assert message.content[0].type == "text"
    assert message.content[0].text == "Simulated reply: ping from the sdk"
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == len("ping from the sdk") // 4


def test_the_sdk_streams_a_message(sim: SimulatorProcess) -> None:
    with (
        plan_client(sim) as client,
        client.messages.stream(
            model="claude-opus-4-1",
            max_tokens=256,
            messages=[{"role": "user", "content": "stream from the sdk please"}],
        ) as stream,
    ):
        text = "".join(stream.text_stream)
        final = stream.get_final_message()

    assert text == "Simulated reply: stream from the sdk please"
    assert final.usage.output_tokens == len(text) // 4
    assert final.stop_reason == "end_turn"


def test_the_sdk_reads_the_unified_headers_from_a_raw_response(
    sim: SimulatorProcess, control: SimulatorControl
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a", capacity={"five_hour": 1000})
    control.set_usage(OAUTH, "five_hour", percent=90)

    with plan_client(sim) as client:
        raw = client.messages.with_raw_response.create(
            model="claude-sonnet-5",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
        )
        message = raw.parse()

    assert raw.status_code == 200
    assert raw.headers["anthropic-ratelimit-unified-status"] == "allowed_warning"
    assert raw.headers["anthropic-ratelimit-unified-representative-claim"] == "five_hour"
    assert float(raw.headers["anthropic-ratelimit-unified-5h-utilization"]) > 0.9
    assert message.content[0].type == "text"


def test_the_sdk_gives_up_at_once_on_an_exhausted_plan(
    sim: SimulatorProcess, control: SimulatorControl
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    control.set_usage(OAUTH, "five_hour", percent=100)

    # Default retries: x-should-retry: false on a plan refusal stops them.
    with plan_client(sim) as client, pytest.raises(anthropic.RateLimitError) as refused:
        client.messages.create(
            model="claude-sonnet-5",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
        )

    headers = refused.value.response.headers
    assert headers["anthropic-ratelimit-unified-status"] == "rejected"
    assert refused.value.body == {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "This request would exceed your account's rate limit. "
            "Please try again later.",
        },
    }
    assert len(control.requests()) == 1


def test_the_sdk_with_a_key_without_credit_raises_bad_request(
    sim: SimulatorProcess, control: SimulatorControl
) -> None:
    control.register(API_KEY, kind="api_key", label="platform-key", credit_usd=0)

    with (
        anthropic.Anthropic(base_url=sim.base_url, api_key=API_KEY, timeout=10.0) as client,
        pytest.raises(anthropic.BadRequestError) as refused,
    ):
        client.messages.create(
            model="claude-sonnet-5",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
        )

    assert "credit balance is too low" in str(refused.value)


def test_the_sdk_counts_tokens(sim: SimulatorProcess) -> None:
    with plan_client(sim) as client:
        counted = client.messages.count_tokens(
            model="claude-sonnet-5",
            messages=[{"role": "user", "content": "count these words"}],
        )

    assert counted.input_tokens == len("count these words") // 4
