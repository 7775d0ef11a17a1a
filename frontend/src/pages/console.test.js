import { afterEach, describe, expect, it } from "vitest";
import { mount } from "@vue/test-utils";
import AgentConsolePage from "./AgentConsolePage.vue";
import ExecutionReplayPage from "./ExecutionReplayPage.vue";
import { ADMIN, OPERATOR, controlledStream, eventStream, json, mockFetch, settle, sseEvent, streamOf } from "../test-utils.js";

let wrapper;
afterEach(() => wrapper?.unmount());

const AGENT = { name: "bot", owner: "operator", process_state: "running", runtime: "claude-code" };
const SUB = (name) => ({ kind: "subscription", name });
const turnEvent = (id, session = "s1", message = "hi") => ({ execution_id: id, agent: "bot", owner: "operator", session_id: session, message, attempt: 0, at: "t" });
const end = (status, extra = {}) => ({ status, error_code: "", error_detail: "", response: "", served_by: SUB("plan-b"), session_id: "s1", attempt: 0, at: "t", ...extra });
const CHAT = "POST /api/agents/bot/chat?owner=operator";

async function mountConsole(routes) {
  const mocked = mockFetch({ "GET /api/agents/bot?owner=operator": json(200, AGENT), ...routes });
  wrapper = mount(AgentConsolePage, { props: { user: OPERATOR, name: "bot", owner: "operator" } });
  await settle();
  return mocked;
}

async function send(text, mode = "chat") {
  await wrapper.find("#console-mode").setValue(mode);
  await wrapper.find("#console-message").setValue(text);
  await wrapper.find("[data-testid=turn-composer]").trigger("submit");
  await settle();
}

const status = () => wrapper.find("[data-testid=live-status]");
const buttons = () => wrapper.findAll("button").map((b) => b.text());

describe("AgentConsolePage", () => {
  it("labels its controls for the browser test", async () => {
    await mountConsole({});
    expect(wrapper.find("label[for=console-mode]").text()).toBe("Mode");
    expect(wrapper.find("label[for=console-message]").text()).toBe("Message");
    expect(wrapper.find("textarea#console-message").exists()).toBe(true);
    expect(buttons()).toContain("Send");
    expect(wrapper.find("h1").text()).toBe("Console: bot");
  });

  it("shows the walk, the tools and the text as they arrive, before the turn ends", async () => {
    const body = controlledStream();
    const { calls } = await mountConsole({ [CHAT]: eventStream(body.stream, { "x-execution-id": "e1" }) });
    await send("hi");
    expect(calls.at(-1)).toMatchObject({ method: "POST", url: "/api/agents/bot/chat?owner=operator", body: { message: "hi", stream: true } });
    body.push(sseEvent(1, "turn", turnEvent("e1")));
    body.push(sseEvent(2, "sent", { attempt: 1, on: SUB("plan-a"), why: "assigned", at: "t" }));
    body.push(sseEvent(3, "text", { attempt: 1, text: "draft" }));
    body.push(sseEvent(4, "refused", { attempt: 1, by: SUB("plan-a"), error_code: "rate_limit", resets_at: null, at: "t" }));
    body.push(sseEvent(5, "walking", { attempt: 1, to: SUB("plan-b"), why: "ranked", at: "t" }));
    body.push(sseEvent(6, "sent", { attempt: 2, on: SUB("plan-b"), why: "ranked", at: "t" }));
    body.push(sseEvent(7, "tool_call", { attempt: 2, id: "t1", name: "Bash", input: "ls", at: "t" }));
    body.push(sseEvent(8, "tool_result", { attempt: 2, id: "t1", ok: true, output: "a.txt", at: "t" }));
    body.push(sseEvent(9, "text", { attempt: 2, text: "Hello" }));
    await settle();
    // Mid-turn: the refused attempt's draft is gone, the serving attempt's text is there.
    expect(wrapper.find("[data-testid=live-text]").text()).toBe("Hello");
    expect(status().text()).toBe("Running…");
    expect(buttons()).toContain("Cancel turn");
    const lines = wrapper.findAll("[data-testid=live-timeline] li").map((li) => li.text());
    expect(lines[0]).toContain("Sent on plan-a");
    expect(lines[1]).toContain("Refused by plan-a: rate limit (rate_limit)");
    expect(lines[2]).toContain("Walking to plan-b");
    expect(lines[4]).toMatch(/Bash\s*ls/);
    expect(wrapper.find("[data-testid=tool-result]").text()).toContain("a.txt");
    body.push(sseEvent(10, "text", { attempt: 2, text: ", world" }));
    body.push(sseEvent(11, "served", { attempt: 2, by: SUB("plan-b"), at: "t" }));
    body.push(sseEvent(12, "committed", { from: "plan-a", to: "plan-b", attempt: 0, at: "t" }));
    body.push(sseEvent(13, "end", end("succeeded", { response: "Hello, world" })));
    body.close();
    await settle();
    expect(wrapper.find("[data-testid=live-text]").text()).toBe("Hello, world");
    expect(status().text()).toBe("Succeeded on plan-b");
    expect(status().attributes("data-status")).toBe("succeeded");
    expect(buttons()).not.toContain("Cancel turn");
    expect(wrapper.text()).toContain("Committed: the agent now runs on plan-b (was plan-a)");
  });

  it("keeps the chat session for the next message and lists the earlier turn", async () => {
    let n = 0;
    const { calls } = await mountConsole({
      [CHAT]: () => {
        n += 1;
        return eventStream(streamOf([sseEvent(1, "turn", turnEvent(`e${n}`, "s1", `m${n}`)), sseEvent(2, "text", { attempt: 1, text: `r${n}` }), sseEvent(3, "end", end("succeeded"))]));
      },
    });
    await send("m1");
    expect(wrapper.find("[data-testid=session-id]").text()).toBe("s1");
    await send("m2");
    expect(calls.filter((c) => c.method === "POST").map((c) => c.body)).toEqual([
      { message: "m1", stream: true },
      { message: "m2", stream: true, session_id: "s1" },
    ]);
    const past = wrapper.findAll("[data-testid=past-turn]");
    expect(past).toHaveLength(1);
    expect(past[0].text()).toContain("m1");
    expect(past[0].find("a").attributes("href")).toBe("#/executions/e1");
    expect(wrapper.findAll("[data-testid=live-turn]")).toHaveLength(1);
    expect(wrapper.find("[data-testid=live-text]").text()).toBe("r2");
  });

  it("sends a task without the session", async () => {
    const { calls } = await mountConsole({
      [CHAT]: eventStream(streamOf([sseEvent(1, "turn", turnEvent("e1")), sseEvent(2, "end", end("succeeded"))])),
      "POST /api/agents/bot/task?owner=operator": eventStream(streamOf([sseEvent(1, "turn", turnEvent("e2")), sseEvent(2, "end", end("succeeded"))])),
    });
    await send("first");
    await send("do it", "task");
    expect(calls.at(-1)).toMatchObject({ url: "/api/agents/bot/task?owner=operator", body: { message: "do it", stream: true } });
  });

  it("cancels a running turn and shows how it ended", async () => {
    const body = controlledStream();
    const { calls } = await mountConsole({
      [CHAT]: eventStream(body.stream, { "x-execution-id": "e7" }),
      "POST /api/executions/e7/cancel": json(200, { id: "e7", status: "running", cancel_requested_at: "t" }),
    });
    await send("long job");
    body.push(sseEvent(1, "turn", turnEvent("e7")));
    await settle();
    await wrapper.find("[data-testid=cancel-turn]").trigger("click");
    await settle();
    expect(calls.at(-1)).toMatchObject({ method: "POST", url: "/api/executions/e7/cancel" });
    expect(wrapper.text()).toContain("Cancelling…");
    body.push(sseEvent(2, "end", end("cancelled", { error_code: "cancelled", served_by: null })));
    body.close();
    await settle();
    expect(status().attributes("data-status")).toBe("cancelled");
    expect(status().text()).toMatch(/^Cancelled/);
  });

  it("resumes from the last seq when the stream drops mid-turn", async () => {
    const body = controlledStream();
    const { calls } = await mountConsole({
      [CHAT]: eventStream(body.stream),
      "GET /api/executions/e1/events?after=2": eventStream(streamOf([sseEvent(3, "text", { attempt: 1, text: " there" }), sseEvent(4, "end", end("succeeded"))])),
    });
    await send("hi");
    body.push(sseEvent(1, "turn", turnEvent("e1")) + sseEvent(2, "text", { attempt: 1, text: "hi" }));
    await settle();
    body.fail();
    await new Promise((r) => setTimeout(r, 1100)); // the first resume waits a second
    await settle();
    expect(calls.some((c) => c.url === "/api/executions/e1/events?after=2")).toBe(true);
    expect(wrapper.find("[data-testid=live-text]").text()).toBe("hi there");
    expect(status().attributes("data-status")).toBe("succeeded");
  });

  it("shows a refused message's error beside it and keeps the message", async () => {
    await mountConsole({ [CHAT]: json(400, { message: ["Ensure this field has no more than 200000 characters."] }) });
    await send("too long");
    expect(wrapper.find("#console-message-error").text()).toBe("Ensure this field has no more than 200000 characters.");
    expect(wrapper.find("#console-message").element.value).toBe("too long");
    expect(wrapper.find("[data-testid=live-turn]").exists()).toBe(false);
  });

  it("says so when the message is empty, sending nothing", async () => {
    const { calls } = await mountConsole({});
    await send("   ");
    expect(wrapper.find("#console-message-error").text()).toBe("Write a message first.");
    expect(calls.filter((c) => c.method === "POST")).toHaveLength(0);
  });

  it("says when the agent's server is not running", async () => {
    mockFetch({ "GET /api/agents/bot?owner=operator": json(200, { ...AGENT, process_state: "stopped" }) });
    wrapper = mount(AgentConsolePage, { props: { user: ADMIN, name: "bot", owner: "operator" } });
    await settle();
    expect(wrapper.find("[data-testid=agent-not-running]").text()).toContain("stopped");
    expect(wrapper.find("h1").text()).toBe("Console: bot (operator)");
  });
});

describe("ExecutionReplayPage", () => {
  it("replays a finished turn's events into the timeline and shows its final state", async () => {
    const { calls } = mockFetch({
      "GET /api/executions/e1": json(200, { id: "e1", agent_name: "bot", agent_owner: "operator", trigger: "chat", status: "failed", attempts: [], created_at: "2026-01-01T00:00:00Z" }),
      "GET /api/executions/e1/events": eventStream(
        streamOf([
          sseEvent(1, "turn", turnEvent("e1")),
          sseEvent(2, "sent", { attempt: 1, on: { kind: "api_key", name: "anthropic" }, why: "api_key", at: "t" }),
          sseEvent(3, "refused", { attempt: 1, by: { kind: "api_key", name: "anthropic" }, error_code: "billing", resets_at: null, at: "t" }),
          sseEvent(4, "end", end("failed", { error_code: "billing", error_detail: "out of credit", served_by: null })),
        ]),
      ),
    });
    wrapper = mount(ExecutionReplayPage, { props: { user: OPERATOR, executionId: "e1" } });
    await settle();
    expect(calls.find((c) => c.url === "/api/executions/e1/events").headers.Accept).toBe("text/event-stream");
    expect(status().attributes("data-status")).toBe("failed");
    expect(status().text()).toBe("Failed: billing (billing). out of credit");
    expect(wrapper.findAll("[data-testid=live-timeline] li")).toHaveLength(2);
    expect(wrapper.find("[data-testid=replay-record] a").attributes("href")).toBe("#/agents/bot/console?owner=operator");
    expect(buttons()).not.toContain("Cancel turn");
  });

  it("says why it can't replay a turn it may not see", async () => {
    mockFetch({
      "GET /api/executions/e1": json(404, { detail: "Not found." }),
      "GET /api/executions/e1/events": json(404, { detail: "Not found." }),
    });
    wrapper = mount(ExecutionReplayPage, { props: { user: OPERATOR, executionId: "e1" } });
    await settle();
    expect(wrapper.text()).toContain("Couldn't load the turn: Not found.");
    expect(buttons()).toContain("Try again");
  });
});
