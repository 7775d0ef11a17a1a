import { describe, expect, it } from "vitest";
import { eventsPath, followTurn, startTurn, StreamLost } from "./turnStream.js";
import { controlledStream, eventStream, json, mockFetch, sseEvent, streamOf } from "./test-utils.js";

const TURN = { execution_id: "e1", agent: "bot", owner: "alice", session_id: "s1", message: "hi", attempt: 0, at: "t" };
const END = { status: "succeeded", error_code: "", error_detail: "", response: "hello", served_by: { kind: "subscription", name: "plan-a" }, session_id: "s1", attempt: 0 };
const POST = "POST /api/agents/bot/chat?owner=alice";
const AGENT = { name: "bot", owner: "alice" };

function follow(routes, extra = {}) {
  const { calls } = mockFetch(routes);
  const events = [];
  const ids = [];
  const reconnects = [];
  const done = followTurn({
    open: (signal) => startTurn({ agent: AGENT, mode: "chat", message: "hi", sessionId: "s0" }, signal),
    onEvent: (e) => events.push(e),
    onExecutionId: (id) => ids.push(id),
    onReconnecting: (n) => reconnects.push(n),
    delayMs: 0,
    ...extra,
  });
  return { calls, events, ids, reconnects, done };
}

describe("startTurn", () => {
  it("posts the message with stream: true, the session for a chat, and the CSRF header", async () => {
    document.cookie = "csrftoken=tok";
    const { calls, done } = follow({ [POST]: eventStream(streamOf([sseEvent(1, "turn", TURN), sseEvent(2, "end", END)])) });
    await done;
    expect(calls[0]).toMatchObject({ method: "POST", url: "/api/agents/bot/chat?owner=alice", body: { message: "hi", stream: true, session_id: "s0" } });
    expect(calls[0].headers["X-CSRFToken"]).toBe("tok");
    expect(calls[0].headers.Accept).toBe("text/event-stream");
  });

  it("sends no session with a task", async () => {
    const { calls } = mockFetch({ "POST /api/agents/bot/task?owner=alice": eventStream(streamOf([])) });
    await startTurn({ agent: AGENT, mode: "task", message: "do", sessionId: "s0" });
    expect(calls[0].body).toEqual({ message: "do", stream: true });
  });
});

describe("followTurn", () => {
  it("passes each event on and resolves at the end", async () => {
    const { events, ids, done } = follow({ [POST]: eventStream(streamOf([sseEvent(1, "turn", TURN), ": keepalive\n\n", sseEvent(2, "end", END)])) });
    await done;
    expect(events.map((e) => [e.seq, e.kind])).toEqual([[1, "turn"], [2, "end"]]);
    expect(ids).toEqual(["e1"]);
  });

  it("knows the execution id from the X-Execution-Id header before any event", async () => {
    const body = controlledStream();
    const { ids, done } = follow({ [POST]: eventStream(body.stream, { "x-execution-id": "e1" }) });
    await new Promise((r) => setTimeout(r, 0));
    expect(ids).toEqual(["e1"]);
    body.push(sseEvent(1, "end", END));
    body.close();
    await done;
  });

  it("resumes after the last seq when the stream drops before the end", async () => {
    const first = controlledStream();
    const { calls, events, reconnects, done } = follow({
      [POST]: eventStream(first.stream),
      "GET /api/executions/e1/events?after=2": eventStream(streamOf([sseEvent(3, "text", { attempt: 1, text: "b" }), sseEvent(4, "end", END)])),
    });
    first.push(sseEvent(1, "turn", TURN) + sseEvent(2, "text", { attempt: 1, text: "a" }));
    await new Promise((r) => setTimeout(r, 0));
    first.fail();
    await done;
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(reconnects).toEqual([1]);
    expect(calls[1]).toMatchObject({ method: "GET", url: "/api/executions/e1/events?after=2" });
    expect(calls[1].headers.Accept).toBe("text/event-stream");
  });

  it("resumes when the server closes the stream cleanly before the end, too", async () => {
    const { events, done } = follow({
      [POST]: eventStream(streamOf([sseEvent(1, "turn", TURN)])),
      "GET /api/executions/e1/events?after=1": eventStream(streamOf([sseEvent(2, "end", END)])),
    });
    await done;
    expect(events.map((e) => e.kind)).toEqual(["turn", "end"]);
  });

  it("stops after a parked event", async () => {
    const { calls, done } = follow({ [POST]: eventStream(streamOf([sseEvent(1, "turn", TURN), sseEvent(2, "parked", { until: "x" })])) });
    await done;
    expect(calls).toHaveLength(1);
  });

  it("gives up with StreamLost after the retries bring nothing", async () => {
    let resumes = 0;
    const { done, reconnects } = follow(
      {
        [POST]: eventStream(streamOf([sseEvent(1, "turn", TURN)])),
        "GET /api/executions/e1/events?after=1": () => {
          resumes += 1;
          return json(503, { detail: "down" });
        },
      },
      { retries: 3 },
    );
    await expect(done).rejects.toBeInstanceOf(StreamLost);
    expect(resumes).toBe(3);
    expect(reconnects).toEqual([1, 2, 3]);
  });

  it("stops at once when a resume is refused", async () => {
    const { done } = follow({
      [POST]: eventStream(streamOf([sseEvent(1, "turn", TURN)])),
      "GET /api/executions/e1/events?after=1": json(404, { detail: "Not found." }),
    });
    await expect(done).rejects.toMatchObject({ status: 404, message: "Not found." });
  });

  it("can't resume a stream that closed before saying which turn it was", async () => {
    const { done } = follow({ [POST]: eventStream(streamOf([": keepalive\n\n"])) });
    await expect(done).rejects.toThrow("closed before the turn started");
  });

  it("rejects with the server's field errors when the turn is refused before it starts", async () => {
    const { done } = follow({ [POST]: json(400, { message: ["This field may not be blank."] }) });
    await expect(done).rejects.toMatchObject({ status: 400, fieldErrors: { message: "This field may not be blank." } });
  });

  it("hands over a plain JSON answer (a server that does not stream)", async () => {
    const { calls } = mockFetch({ [POST]: json(200, { id: "e1", status: "succeeded" }) });
    const bodies = [];
    await followTurn({ open: (s) => startTurn({ agent: AGENT, mode: "chat", message: "hi" }, s), onEvent: () => {}, onJson: (b) => bodies.push(b) });
    expect(bodies).toEqual([{ id: "e1", status: "succeeded" }]);
    expect(calls).toHaveLength(1);
  });

  it("stops when aborted", async () => {
    const body = controlledStream();
    const controller = new AbortController();
    mockFetch({ [POST]: eventStream(body.stream) });
    const done = followTurn({
      open: (s) => startTurn({ agent: AGENT, mode: "chat", message: "hi" }, s),
      onEvent: () => {},
      signal: controller.signal,
      delayMs: 0,
    });
    body.push(sseEvent(1, "turn", TURN));
    await new Promise((r) => setTimeout(r, 0));
    controller.abort();
    body.fail();
    await expect(done).rejects.toThrow();
  });
});

describe("eventsPath", () => {
  it("asks for the events after a seq, or all of them", () => {
    expect(eventsPath("e1")).toBe("/api/executions/e1/events");
    expect(eventsPath("e1", 7)).toBe("/api/executions/e1/events?after=7");
  });
});
