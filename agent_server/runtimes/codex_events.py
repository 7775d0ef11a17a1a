"""What a line of `codex exec --json` means as events.

`item.started` / `item.completed` carry an item: an `agent_message` (completed)
is answer text; a `command_execution` is a tool call named "shell" when it starts
(its `command`) and its result when it completes (`exit_code` 0 is ok, the output is
its `aggregated_output`). A command that completes unseen (no start line) still gets
its call first. Every other line (`thread.started`, `turn.*`, `error`, reasoning and
other items) is no event; `codex_cli.parse_events` reads what the result needs.
"""

from __future__ import annotations

from typing import Any

from agent_server.runtimes.events import Event, text_event, tool_call_event, tool_result_event

SHELL: str = "shell"


def codex_line_events(line: dict[str, Any], started: set[str]) -> list[Event]:
    """The events of one parsed line; `started` holds the ids of the commands whose
    call was already shown (this function adds to it)."""
    kind = line.get("type")
    item = line.get("item")
    if kind not in ("item.started", "item.completed") or not isinstance(item, dict):
        return []
    item_type = item.get("type")
    if item_type == "agent_message" and kind == "item.completed":
        text = item.get("text")
        return [text_event(text)] if isinstance(text, str) and text else []
    if item_type != "command_execution":
        return []
    id_ = str(item.get("id") or "")
    events: list[Event] = []
    if id_ not in started:
        started.add(id_)
        events.append(tool_call_event(id_, SHELL, str(item.get("command") or "")))
    if kind == "item.completed":
        exit_code = item.get("exit_code")
        output = item.get("aggregated_output")
        events.append(
            tool_result_event(
                id_,
                exit_code == 0 and not isinstance(exit_code, bool),
                output if isinstance(output, str) else "",
            )
        )
    return events
