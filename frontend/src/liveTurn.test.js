import { describe, expect, it } from "vitest";
import {
  applyEvent,
  emptyTurn,
  fromExecution,
  isOver,
  itemLine,
  parseTurnEvent,
  replyText,
  statusLine,
  withExecutionId,
} from "./liveTurn.js";

const SUB = (name) => ({ kind: "subscription", name });
const KEY = { kind: "api_key", name: "anthropic" };

/** Apply [kind, data] pairs with seqs 1, 2, … */
function run(events, turn = emptyTurn()) {
  return events.reduce((t, [kind, data], i) => applyEvent(t, { seq: i + 1, kind, data }), turn);
}

const TURN = ["turn", { execution_id: "e1", agent: "bot", owner: "alice", session_id: "s1", message: "hi", attempt: 0 }];

describe("parseTurnEvent", () => {
  it("reads the seq, kind and JSON data of an SSE event", () => {
    expect(parseTurnEvent({ id: "4", event: "text", data: '{"attempt":1,"text":"a"}' })).toEqual({
      seq: 4,
      kind: "text",
      data: { attempt: 1, text: "a" },
    });
  });

  it.each([["not json"], ["[1]"], ["null"], ['"text"']])("skips data that is not a JSON object: %s", (data) => {
    expect(parseTurnEvent({ id: "1", event: "text", data })).toBeNull();
  });

  it("gives an event without a numeric id no seq", () => {
    expect(parseTurnEvent({ id: "", event: "text", data: "{}" }).seq).toBeNull();
  });
});

describe("applyEvent", () => {
  it("starts running on the turn event and keeps what it says", () => {
    const t = run([TURN]);
    expect(t).toMatchObject({ status: "running", executionId: "e1", agent: "bot", owner: "alice", sessionId: "s1", message: "hi", lastSeq: 1 });
  });

  it("joins an attempt's text as it arrives", () => {
    const t = run([TURN, ["sent", { attempt: 1, on: SUB("plan-a"), why: "assigned" }], ["text", { attempt: 1, text: "Hel" }], ["text", { attempt: 1, text: "lo" }]]);
    expect(replyText(t)).toBe("Hello");
    expect(t.items.map((i) => i.kind)).toEqual(["sent"]);
    expect(itemLine(t.items[0])).toBe("Sent on plan-a (its assigned subscription)");
  });

  it("clears a refused attempt's text on walking, and keeps the next attempt's", () => {
    const t = run([
      TURN,
      ["sent", { attempt: 1, on: SUB("plan-a"), why: "assigned" }],
      ["text", { attempt: 1, text: "partial" }],
      ["refused", { attempt: 1, by: SUB("plan-a"), error_code: "rate_limit", resets_at: "2026-01-01T10:00:00Z" }],
      ["walking", { attempt: 1, to: SUB("plan-b"), why: "ranked" }],
      ["sent", { attempt: 2, on: SUB("plan-b"), why: "ranked" }],
      ["text", { attempt: 2, text: "full answer" }],
      ["served", { attempt: 2, by: SUB("plan-b") }],
      ["committed", { from: "plan-a", to: "plan-b" }],
    ]);
    expect(replyText(t)).toBe("full answer");
    expect(t.items.map((i) => itemLine(i, (x) => `<${x}>`))).toEqual([
      "Sent on plan-a (its assigned subscription)",
      "Refused by plan-a: rate limit (rate_limit), resets <2026-01-01T10:00:00Z>",
      "Walking to plan-b (next best by headroom); the refused attempt's text was discarded",
      "Sent on plan-b (next best by headroom)",
      "Served by plan-b",
      "Committed: the agent now runs on plan-b (was plan-a)",
    ]);
  });

  it("says nothing was discarded when the refused attempt had no text", () => {
    const t = run([TURN, ["refused", { attempt: 1, by: SUB("a"), error_code: "auth", resets_at: null }], ["walking", { attempt: 1, to: KEY, why: "api_key" }]]);
    expect(itemLine(t.items[1])).toBe("Walking to platform API key (last rung, billed per token)");
    expect(itemLine(t.items[0])).toBe("Refused by a: credential refused (auth)");
  });

  it("pairs a tool result with its call by id", () => {
    const t = run([
      TURN,
      ["tool_call", { attempt: 1, id: "t1", name: "Bash", input: "ls" }],
      ["tool_call", { attempt: 1, id: "t2", name: "Read", input: "/etc/hosts" }],
      ["tool_result", { attempt: 1, id: "t2", ok: false, output: "denied" }],
      ["tool_result", { attempt: 1, id: "t1", ok: true, output: "a b" }],
    ]);
    expect(t.items.map(({ name, input, result }) => ({ name, input, result }))).toEqual([
      { name: "Bash", input: "ls", result: { ok: true, output: "a b" } },
      { name: "Read", input: "/etc/hosts", result: { ok: false, output: "denied" } },
    ]);
  });

  it("shows a result whose call it never saw on its own", () => {
    const t = run([TURN, ["tool_result", { attempt: 1, id: "zz", ok: true, output: "x" }]]);
    expect(t.items[0]).toMatchObject({ kind: "tool", id: "zz", name: "", result: { ok: true, output: "x" } });
  });

  it("says how many events were dropped when the output was cut short", () => {
    const t = run([TURN, ["truncated", { attempt: 1, dropped: 12 }]]);
    expect(itemLine(t.items[0])).toBe("Output cut short: 12 more events not shown (the turn went on)");
  });

  it("ends with the end event's status, served credential and session", () => {
    const t = run([TURN, ["text", { attempt: 1, text: "ok" }], ["end", { status: "succeeded", error_code: "", error_detail: "", response: "ok", served_by: SUB("plan-b"), session_id: "s2" }]]);
    expect(t.status).toBe("succeeded");
    expect(t.sessionId).toBe("s2");
    expect(isOver(t)).toBe(true);
    expect(statusLine(t)).toBe("Succeeded on plan-b");
  });

  it("says why a turn failed or was cancelled", () => {
    const failed = run([TURN, ["end", { status: "failed", error_code: "rate_limit", error_detail: "every plan refused", response: "", served_by: null, session_id: null }]]);
    expect(statusLine(failed)).toBe("Failed: rate limit (rate_limit). every plan refused");
    expect(failed.sessionId).toBe("s1");
    const cancelled = run([TURN, ["end", { status: "cancelled", error_code: "cancelled", error_detail: "Cancelled by alice.", served_by: null }]]);
    expect(cancelled.status).toBe("cancelled");
    expect(statusLine(cancelled)).toBe("Cancelled. Cancelled by alice.");
  });

  it("shows the final response when no text streamed", () => {
    const t = run([TURN, ["end", { status: "succeeded", response: "the answer", served_by: KEY }]]);
    expect(replyText(t)).toBe("the answer");
    expect(statusLine(t)).toBe("Succeeded on platform API key");
  });

  it("parks until the time the parked event names", () => {
    const t = run([TURN, ["parked", { until: "2026-01-01T10:00:00Z" }]]);
    expect(t.status).toBe("parked");
    expect(isOver(t)).toBe(true);
    expect(statusLine(t, () => "10:00")).toBe("Parked until 10:00");
    expect(itemLine(t.items[0], () => "10:00")).toBe("Parked until 10:00");
  });

  it("ignores an event it already applied (a resume's overlap) and moves past unknown kinds", () => {
    let t = run([TURN, ["text", { attempt: 1, text: "a" }]]);
    t = applyEvent(t, { seq: 2, kind: "text", data: { attempt: 1, text: "a" } });
    expect(replyText(t)).toBe("a");
    t = applyEvent(t, { seq: 3, kind: "future_kind", data: {} });
    expect(t.lastSeq).toBe(3);
    expect(t.items).toEqual([]);
  });

  it("does not change the state it was given", () => {
    const before = run([TURN]);
    const frozen = JSON.stringify(before);
    applyEvent(before, { seq: 2, kind: "text", data: { attempt: 1, text: "x" } });
    expect(JSON.stringify(before)).toBe(frozen);
  });
});

describe("fromExecution and withExecutionId", () => {
  it("reads a finished ExecutionOutput as the end state", () => {
    const t = fromExecution(emptyTurn(), { id: "e9", status: "succeeded", response: "hi", served_by_kind: "subscription", served_by_subscription: { id: 1, name: "plan-a" }, session_id: "s" });
    expect(t).toMatchObject({ executionId: "e9", status: "succeeded", sessionId: "s" });
    expect(replyText(t)).toBe("hi");
    expect(statusLine(t)).toBe("Succeeded on plan-a");
  });

  it("reads a running or parked one as not over", () => {
    expect(fromExecution(emptyTurn(), { id: "e", status: "running" }).status).toBe("running");
    expect(fromExecution(emptyTurn(), { id: "e", status: "parked", parked_until: "x" })).toMatchObject({ status: "parked", parkedUntil: "x" });
  });

  it("keeps the first execution id it learns", () => {
    expect(withExecutionId(withExecutionId(emptyTurn(), "a"), "b").executionId).toBe("a");
  });
});
