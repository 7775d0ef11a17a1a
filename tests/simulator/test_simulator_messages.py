"""The Messages API over real HTTP: JSON and SSE replies, auth, models, unknown paths."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx

from simulator.control import SimulatorControl

OAUTH = "sk-ant-oat01-messages-0000-aaaa"
PostMessage = Callable[..., httpx.Response]


def sse_events(body: str) -> list[tuple[str, dict[str, object]]]:
    """Parse ``event: <name>\\ndata: <json>\\n\\n`` frames, strictly."""
    assert body.endswith("\n\n")
    events = []
    for frame in body.split("\n\n")[:-1]:
        event_line, data_line = frame.split("\n")
        assert event_line.startswith("event: ")
        assert data_line.startswith("data: ")
        events.append((event_line[len("event: ") :], json.loads(data_line[len("data: ") :])))
    return events


def test_it_answers_json_with_a_deterministic_reply_and_usage(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")

    first = post_message(token=OAUTH, text="what is   the\nweather")
    second = post_message(token=OAUTH, text="what is   the\nweather")

    assert first.status_code == 200
    body = first.json()
    assert body["type"] == "message"
    assert body["role"] == "assistant"
    assert body["model"] == "claude-sonnet-4-5"
    assert body["content"] == [{"type": "text", "text": "Simulated reply: what is the weather"}]
    assert body["stop_reason"] == "end_turn"
    # ~len/4, never below one: 21 characters in, 36 characters out.
    assert body["usage"]["input_tokens"] == 5
    assert body["usage"]["output_tokens"] == 9
    assert second.json()["content"] == body["content"]
    assert second.json()["usage"] == body["usage"]


def test_it_streams_the_sse_events_in_the_real_order(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")

    response = post_message(token=OAUTH, text="stream me a fairly long answer please", stream=True)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["anthropic-ratelimit-unified-status"] == "allowed"
    events = sse_events(response.text)
    names = [name for name, _ in events]
    deltas = names.count("content_block_delta")
    assert deltas >= 2
    assert names == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == name for name, data in events)
    start = events[0][1]["message"]
    assert isinstance(start, dict)
    assert start["usage"]["input_tokens"] == len("stream me a fairly long answer please") // 4
    text = "".join(
        data["delta"]["text"]  # type: ignore[index]
        for name, data in events
        if name == "content_block_delta"
    )
    assert text == "Simulated reply: stream me a fairly long answer please"
    message_delta = events[-2][1]
    assert message_delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert message_delta["usage"] == {"output_tokens": len(text) // 4}


def test_count_tokens_answers_without_spending_quota(
    control: SimulatorControl, api: httpx.Client
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")

    response = api.post(
        "/v1/messages/count_tokens?beta=true",
        headers={"authorization": f"Bearer {OAUTH}"},
        json={
            "model": "claude-sonnet-4-5",
            "system": "be brief",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "count me"}]}],
        },
    )

    assert response.status_code == 200
    assert response.json() == {"input_tokens": len("be brief\ncount me") // 4}
    assert control.credential("plan-a")["windows"]["five_hour"]["used"] == 0


def test_a_request_without_credentials_gets_401(post_message: PostMessage) -> None:
    response = post_message()

    assert response.status_code == 401
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "authentication_error"
    assert response.headers["request-id"].startswith("req_")


def test_a_bearer_that_is_no_plan_token_gets_401(post_message: PostMessage) -> None:
    response = post_message(token="not-an-anthropic-token")

    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_an_unknown_model_gets_404_with_the_model_named(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")

    response = post_message(token=OAUTH, model="claude-imaginary-9")

    assert response.status_code == 404
    assert response.json() == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "model: claude-imaginary-9"},
    }
    assert response.headers["request-id"].startswith("req_")
    assert response.headers["anthropic-ratelimit-unified-status"] == "allowed"


def test_dated_names_of_known_models_are_served(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")

    assert post_message(token=OAUTH, model="claude-haiku-4-5-20251001").status_code == 200
    assert post_message(token=OAUTH, model="claude-haiku-4-5-2025").status_code == 404


def test_a_model_added_through_control_is_served(
    control: SimulatorControl, post_message: PostMessage
) -> None:
    control.register(OAUTH, kind="oauth", label="plan-a")
    assert post_message(token=OAUTH, model="claude-future-9").status_code == 404

    assert "claude-future-9" in control.add_model("claude-future-9")

    assert post_message(token=OAUTH, model="claude-future-9").status_code == 200


def test_the_default_models_include_what_the_cli_sends(control: SimulatorControl) -> None:
    models = set(control.models())

    assert {
        "claude-sonnet-5",
        "claude-sonnet-5-5",
        "claude-opus-4-8",
        "claude-sonnet-4-5",
        "claude-opus-4-1",
        "claude-haiku-4-5",
        "claude-3-5-haiku-latest",
    } <= models


def test_unknown_paths_answer_a_quiet_json_404(api: httpx.Client) -> None:
    head = api.head("/")
    get = api.get("/v1/models/whatever")

    assert head.status_code == 404
    assert get.status_code == 404
    assert get.json() == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "Not found"},
    }
