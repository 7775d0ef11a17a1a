"""What the platform keeps of the events an agent server passes on: only the
contract's, redacted, bounded; and a stream that is garbage never breaks the turn
(``execution/live/events.py``, ``agents/client.py::turn_stream_read``). The agent
server's own bounds are pinned in tests/agent_server/test_stream.py."""

from __future__ import annotations

import json
import secrets

import pytest

from agents.client import turn_stream_read
from execution.live.events import MAX_CLI_EVENTS, TEXT_MAX, TurnEvents, cli_event_fields
from execution.live.store import events_cached
from trinity_contract.redaction import register_secret


def test_only_the_contracts_kinds_and_fields_are_kept() -> None:
    offs: list[object] = [None, "text", 3, [], {"kind": "shell", "text": "x"}, {"kind": "text"}]
    for off in offs:
        assert cli_event_fields(off) is None
    kind, data = cli_event_fields(
        {"kind": "tool_call", "id": "t1", "name": "Bash", "input": "ls", "secret": "x"}
    ) or ("", {})
    assert (kind, data) == ("tool_call", {"id": "t1", "name": "Bash", "input": "ls"})
    assert cli_event_fields({"kind": "tool_result", "id": 7, "ok": "yes"}) == (
        "tool_result",
        {"id": "7", "output": "", "ok": False},
    )
    _, long_text = cli_event_fields({"kind": "text", "text": "x" * 50_000}) or ("", {})
    assert len(long_text["text"]) == TEXT_MAX


def test_a_secret_in_an_event_is_redacted_before_it_is_kept() -> None:
    token = "sk-ant-oat01-" + secrets.token_urlsafe(40)
    register_secret(token)
    _, data = cli_event_fields({"kind": "text", "text": f"the token is {token}"}) or ("", {})
    assert token not in data["text"] and data["text"].startswith("the token is ")
    _, call = cli_event_fields(
        {"kind": "tool_call", "id": "a", "name": "Bash", "input": f"echo {token}"}
    ) or ("", {})
    assert token not in call["input"]


@pytest.mark.django_db
def test_a_turn_keeps_at_most_its_bound_of_cli_events_and_says_so_once() -> None:
    events = TurnEvents(execution_id="00000000-0000-0000-0000-000000000001")
    for n in range(MAX_CLI_EVENTS + 50):
        events.cli({"kind": "text", "text": f"w{n} "})
    published = []
    after = 0
    while batch := events_cached(events.execution_id, after):
        published += batch
        after = batch[-1]["seq"]
    assert [e["seq"] for e in published] == list(range(1, MAX_CLI_EVENTS + 2))
    assert [e["kind"] for e in published[-2:]] == ["text", "truncated"]
    assert events.cli_dropped == 50


def _lines(*items: object) -> list[bytes]:
    return [i if isinstance(i, bytes) else json.dumps(i).encode() for i in items]


def test_a_garbage_stream_reaches_its_result_and_passes_on_only_events() -> None:
    seen: list[object] = []
    answer = {"execution_id": "e", "response": "hi", "model": "m", "usage": {}}
    lines = _lines(
        b"not json at all",
        b"\xff\xfe binary",
        [1, 2],
        {"type": "event", "event": {"kind": "text", "text": "a"}},
        {"type": "event", "event": {"kind": "text", "text": "x" * 100_000}},  # over the line bound
        {"type": "mystery"},
        {"type": "result", "status": 200, "body": answer},
        {"type": "event", "event": {"kind": "text", "text": "after the result"}},
    )
    outcome = turn_stream_read(iter(lines), "oauth_token", seen.append)
    assert outcome.ok and outcome.response == "hi" and outcome.override_echo == "oauth_token"
    assert seen == [{"kind": "text", "text": "a"}]


def test_a_stream_without_a_readable_result_is_a_fault_that_never_walks() -> None:
    for lines in (
        _lines({"type": "event", "event": {"kind": "text", "text": "a"}}),
        _lines({"type": "result", "status": "200", "body": {}}),
        _lines({"type": "result", "status": 429, "body": "not an object"}),
    ):
        outcome = turn_stream_read(iter(lines), None, lambda _: None)
        assert not outcome.ok and outcome.error_code == "container_fault"
