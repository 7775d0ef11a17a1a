"""What a CLI line means as events, and the one layer that bounds and redacts them.

The Claude rows are lines the pinned CLI (2.1.332, `--output-format stream-json
--verbose --include-partial-messages`) printed against the simulator, cut to the
fields that matter; the Codex rows follow `codex exec --json` (0.169.0).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_server.runtimes.claude_events import claude_line_events, is_result
from agent_server.runtimes.codex_events import codex_line_events
from agent_server.runtimes.events import (
    INPUT_CHARS,
    MAX_EVENT_BYTES,
    MAX_EVENTS,
    OUTPUT_CHARS,
    TEXT_CHARS,
    Event,
    EventBounds,
    json_object,
    text_event,
    tool_call_event,
    tool_result_event,
)
from agent_server.runtimes.process import LINE_LIMIT, LineReader
from trinity_contract.redaction import Redactor

MSG = "msg_sim_1f86d3d578f5978f6fbec392"


def delta(text: str, message_id: str = MSG, parent: str | None = None) -> dict[str, Any]:
    return {
        "type": "stream_event",
        "event": {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        },
        "parent_tool_use_id": parent,
        "api_message_id": message_id,
    }


def assistant(*blocks: dict[str, Any], message_id: str = MSG) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {"id": message_id, "role": "assistant", "content": list(blocks)},
        "parent_tool_use_id": None,
    }


def tool_use(id_: str, name: str, tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": tool_input}


def tool_results(*results: dict[str, Any]) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": list(results)}}


@pytest.mark.parametrize(
    ("line", "events"),
    [
        (delta("Simulated reply: "), [text_event("Simulated reply: ")]),
        (delta(""), []),
        (delta("a subagent's", parent="toolu_1"), []),
        # the whole message repeats the deltas' text: only its tool calls count
        (assistant({"type": "text", "text": "Simulated reply: hi"}), []),
        (
            assistant(tool_use("toolu_1", "Bash", {"command": "sleep 60", "description": "x"})),
            [tool_call_event("toolu_1", "Bash", "sleep 60")],
        ),
        (
            assistant(tool_use("toolu_2", "Read", {"file_path": "/etc/hostname"})),
            [tool_call_event("toolu_2", "Read", "/etc/hostname")],
        ),
        (
            assistant(tool_use("toolu_3", "Glob", {"pattern": "*.py", "n": 1})),
            [tool_call_event("toolu_3", "Glob", '{"pattern":"*.py","n":1}')],
        ),
        (
            tool_results(
                {"tool_use_id": "toolu_1", "type": "tool_result", "content": "hello"},
                {
                    "tool_use_id": "toolu_2",
                    "type": "tool_result",
                    "content": [{"type": "text", "text": "denied"}],
                    "is_error": True,
                },
            ),
            [
                tool_result_event("toolu_1", True, "hello"),
                tool_result_event("toolu_2", False, "denied"),
            ],
        ),
        ({"type": "system", "subtype": "init", "tools": ["Bash"]}, []),
        ({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}}, []),
        ({"type": "assistant", "message": "not a message"}, []),
        ({"type": "assistant", "message": {"content": [1, "x", None]}}, []),
        ({"type": "stream_event", "event": {"type": "content_block_delta", "delta": 3}}, []),
        (
            {"type": "user", "message": {"content": [{"type": "tool_result"}]}},
            [tool_result_event("", True, "")],
        ),
    ],
)
def test_each_claude_line_means_these_events(line: dict[str, Any], events: list[Event]) -> None:
    assert claude_line_events(line, {MSG}) == events


def test_a_message_that_streamed_no_deltas_gives_its_text_whole() -> None:
    streamed: set[str] = set()
    whole = assistant({"type": "text", "text": "hi"}, message_id="msg_2")
    assert claude_line_events(whole, streamed) == [text_event("hi")]
    assert claude_line_events(delta("hi", message_id="msg_3"), streamed) == [text_event("hi")]
    assert (
        claude_line_events(assistant({"type": "text", "text": "hi"}, message_id="msg_3"), streamed)
        == []
    )


def test_the_result_line_is_recognised_and_is_no_event() -> None:
    result = {"type": "result", "is_error": False, "result": "hi"}
    assert is_result(result) and is_result({"is_error": True})
    assert not is_result({"type": "assistant"})
    assert claude_line_events(result, set()) == []


def command(kind: str, id_: str, **fields: Any) -> dict[str, Any]:
    item = {"id": id_, "type": "command_execution", "command": "bash -lc ls", **fields}
    return {"type": kind, "item": item}


def test_codex_lines_mean_text_and_shell_calls_with_their_results() -> None:
    started: set[str] = set()
    message = {
        "type": "item.completed",
        "item": {"id": "i0", "type": "agent_message", "text": "hi"},
    }
    assert codex_line_events(message, started) == [text_event("hi")]
    assert codex_line_events(command("item.started", "i1", status="in_progress"), started) == [
        tool_call_event("i1", "shell", "bash -lc ls")
    ]
    done = command("item.completed", "i1", aggregated_output="a\nb\n", exit_code=0)
    assert codex_line_events(done, started) == [tool_result_event("i1", True, "a\nb\n")]
    # a completion never seen starting still shows its call first; a failure is not ok
    failed = command("item.completed", "i2", aggregated_output="no", exit_code=2)
    assert codex_line_events(failed, started) == [
        tool_call_event("i2", "shell", "bash -lc ls"),
        tool_result_event("i2", False, "no"),
    ]
    assert (
        codex_line_events(command("item.completed", "i3", exit_code=False), started)[1]["ok"]
        is False
    )


@pytest.mark.parametrize(
    "line",
    [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.completed", "usage": {"input_tokens": 1}},
        {"type": "item.started", "item": {"id": "i0", "type": "agent_message", "text": "x"}},
        {"type": "item.completed", "item": {"id": "r", "type": "reasoning", "text": "x"}},
        {"type": "item.completed", "item": "not an item"},
        {"type": "error", "message": "retrying"},
    ],
)
def test_other_codex_lines_are_no_events(line: dict[str, Any]) -> None:
    assert codex_line_events(line, set()) == []


@pytest.mark.parametrize(
    "raw", [b"", b"garbage", b"[1, 2]", b'"x"', b"{", b"[" * 100_000, b"\xff\xfe"]
)
def test_an_unreadable_line_is_no_object(raw: bytes) -> None:
    assert json_object(raw) is None


def collect(redactor: Redactor | None = None) -> tuple[EventBounds, list[Event]]:
    out: list[Event] = []
    return EventBounds(redactor=redactor or Redactor(), emit=out.append), out


def test_text_waits_for_whitespace_so_a_credential_in_pieces_is_masked_whole() -> None:
    secret = "sk-ant-oat01-streamed-in-pieces-abcd"
    bounds, out = collect()
    for piece in ("Your token is sk-ant-", "oat01-streamed-", "in-pieces-abcd", " done"):
        bounds.take([text_event(piece)])
    bounds.close()
    text = "".join(event["text"] for event in out)
    assert secret not in text and "[redacted:…abcd]" in text
    assert text.endswith(" done")
    assert out[0] == text_event("Your token is ")  # sent as soon as it was safe


def test_a_line_without_text_sends_what_text_was_held() -> None:
    bounds, out = collect()
    bounds.take([text_event("hi")])
    assert out == []
    bounds.take([])
    assert out == [text_event("hi")]


def test_the_turns_own_secret_is_redacted_in_every_field() -> None:
    redactor = Redactor()
    redactor.add("turn-secret-value-123456")
    bounds, out = collect(redactor)
    bounds.take([tool_call_event("id", "Bash", "echo turn-secret-value-123456")])
    bounds.take([tool_result_event("id", True, "x turn-secret-value-123456 y")])
    assert "turn-secret-value-123456" not in json.dumps(out)
    assert out[0]["input"] == "echo [redacted:…3456]"


def test_every_field_is_cut_to_its_cap_and_long_text_split() -> None:
    bounds, out = collect()
    bounds.take([tool_call_event("i" * 500, "n" * 500, "c" * 5000)])
    bounds.take([tool_result_event("i", False, "o" * 5000)])
    bounds.take([text_event("t" * (TEXT_CHARS * 2 + 10))])
    bounds.close()
    call, result, *texts = out
    assert len(call["id"]) == 100 and len(call["name"]) == 100
    assert len(call["input"]) == INPUT_CHARS and call["input"].endswith("…")
    assert len(result["output"]) == OUTPUT_CHARS
    assert [len(event["text"]) for event in texts] == [TEXT_CHARS, TEXT_CHARS, 10]


def test_the_event_count_cap_sends_one_truncated_then_nothing() -> None:
    bounds, out = collect()
    for index in range(MAX_EVENTS + 500):
        bounds.take([tool_result_event(str(index), True, "x")])
    bounds.take([text_event("late ")])
    bounds.close()
    assert len(out) == MAX_EVENTS + 1
    assert out[-1] == {"kind": "truncated", "dropped": 1}
    assert bounds.stopped


def test_the_event_text_cap_holds_in_bytes() -> None:
    bounds, out = collect()
    for _ in range(400):  # 1000 bytes of output each
        bounds.take([tool_result_event("i", True, "é" * OUTPUT_CHARS)])
    sent = sum(len(e.get("output", "").encode()) + len(e.get("id", "").encode()) for e in out)
    assert sent <= MAX_EVENT_BYTES
    assert out[-1]["kind"] == "truncated" and 250 < len(out) < 270


def lines_of(chunks: list[bytes]) -> list[bytes]:
    got: list[bytes] = []
    reader = LineReader(got.append)
    for chunk in chunks:
        reader.feed(chunk)
    reader.end()
    return got


def test_lines_are_split_across_chunks_and_an_overlong_one_is_skipped() -> None:
    assert lines_of([b"a\nb", b"c\n", b"\nd"]) == [b"a", b"bc", b"", b"d"]
    huge = b"x" * (LINE_LIMIT + 10)
    assert lines_of([b"ok\n", huge[:100], huge[100:], b"\nafter\n"]) == [b"ok", b"after"]
    assert lines_of([huge]) == []


def test_a_line_handler_that_raises_costs_only_its_line() -> None:
    got: list[bytes] = []

    def handler(line: bytes) -> None:
        if line == b"boom":
            raise ValueError(line)
        got.append(line)

    reader = LineReader(handler)
    reader.feed(b"a\nboom\nb\n")
    assert got == [b"a", b"b"]
