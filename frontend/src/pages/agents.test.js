import { afterEach, describe, expect, it } from "vitest";
import { mount } from "@vue/test-utils";
import AgentsPage from "./AgentsPage.vue";
import SchedulesPage from "./SchedulesPage.vue";
import { ADMIN, OPERATOR, json, mockFetch, settle } from "../test-utils.js";

let wrapper;
afterEach(() => wrapper?.unmount());

const SUBS = [
  { id: 3, name: "plan-a", provider: "anthropic" },
  { id: 4, name: "plan-b", provider: "anthropic" },
  { id: 9, name: "codex-plan", provider: "openai-codex" },
];

function agent(overrides = {}) {
  return {
    name: "bot",
    owner: "operator",
    runtime: "claude-code",
    model: "",
    subscription: { id: 3, name: "plan-a" },
    use_platform_api_key: null,
    routing_policy: "thrifty",
    wait_policy: "wait",
    max_wait_seconds: 3600,
    allowed_tools: [],
    process_state: "running",
    process_detail: "",
    isolation: "sandbox",
    last_switch: {},
    platform_key: { allowed: true, reason: "" },
    ...overrides,
  };
}

async function mountPage(routes, user = OPERATOR) {
  const mocked = mockFetch({
    "GET /api/subscriptions": json(200, SUBS),
    "GET /api/subscriptions/settings/api-key-fallback": json(200, { enabled: true, key_configured: true }),
    "GET /api/week-plan": json(200, null),
    ...routes,
  });
  wrapper = mount(AgentsPage, { props: { user } });
  await settle();
  return mocked;
}

const button = (name, root = wrapper) => root.findAll("button").find((b) => b.text() === name);
const row = (name) => wrapper.find(`tr[data-agent=${name}]`);

describe("AgentsPage: creating", () => {
  it("creates an agent with a chosen plan: the agent first, then its assignment", async () => {
    const created = agent({ subscription: null });
    const { calls } = await mountPage({
      "GET /api/agents": json(200, []),
      "POST /api/agents": json(201, created),
      "PUT /api/subscriptions/agents/bot": json(200, { agent: "bot", subscription_id: 4 }),
      "GET /api/agents/bot": json(200, agent({ subscription: { id: 4, name: "plan-b" } })),
    });
    await button("New agent").trigger("click");
    const form = wrapper.find("[data-testid=agent-form]");
    await form.find("#new-agent-name").setValue("bot");
    // The codex plan is not offered to a Claude runtime.
    expect(form.findAll("#new-agent-subscription option").map((o) => o.text())).toEqual(["Automatic (best-ranked)", "None", "plan-a", "plan-b"]);
    await form.find("#new-agent-subscription").setValue("4");
    await form.find("#new-agent-wait").setValue("fail");
    await form.findAll("input[type=checkbox]").find((c) => c.element.value === "Read").setValue(true);
    await form.trigger("submit");
    await settle();
    expect(calls.find((c) => c.method === "POST").body).toEqual({
      name: "bot",
      runtime: "claude-code",
      model: "",
      wait_policy: "fail",
      allowed_tools: ["Read"],
      use_platform_api_key: null,
      auto_assign: false,
    });
    expect(calls.find((c) => c.method === "PUT")).toMatchObject({ url: "/api/subscriptions/agents/bot?owner=operator", body: { subscription_id: 4 } });
    expect(wrapper.find("[data-testid=agent-form]").exists()).toBe(false);
    expect(row("bot").text()).toContain("plan-b");
    expect(wrapper.find("[data-testid=agents-message]").text()).toBe("Created bot.");
  });

  it("offers the new runtime's plans when the runtime changes, dropping a plan it can't use", async () => {
    await mountPage({ "GET /api/agents": json(200, []) });
    await button("New agent").trigger("click");
    await wrapper.find("#new-agent-subscription").setValue("3");
    await wrapper.find("#new-agent-runtime").setValue("codex-cli");
    await settle();
    expect(wrapper.findAll("#new-agent-subscription option").map((o) => o.text())).toEqual(["Automatic (best-ranked)", "None", "codex-plan"]);
    expect(wrapper.find("#new-agent-subscription").element.value).toBe("auto");
  });

  it("shows the server's field errors beside their fields and keeps the form", async () => {
    await mountPage({
      "GET /api/agents": json(200, []),
      "POST /api/agents": json(409, { name: ["You already have an agent named bot."] }),
    });
    await button("New agent").trigger("click");
    await wrapper.find("#new-agent-name").setValue("bot");
    await wrapper.find("[data-testid=agent-form]").trigger("submit");
    await settle();
    expect(wrapper.find("#new-agent-name-error").text()).toBe("You already have an agent named bot.");
    expect(wrapper.find("#new-agent-name").attributes("aria-invalid")).toBe("true");
    expect(wrapper.find("[data-testid=agent-form]").exists()).toBe(true);
  });

  it("says what is wrong with a name before sending it", async () => {
    const { calls } = await mountPage({ "GET /api/agents": json(200, []) });
    await button("New agent").trigger("click");
    await wrapper.find("#new-agent-name").setValue("two words");
    await wrapper.find("[data-testid=agent-form]").trigger("submit");
    await settle();
    expect(wrapper.find("#new-agent-name-error").text()).toContain("Letters, digits");
    expect(calls.some((c) => c.method === "POST")).toBe(false);
  });

  it("says a created agent's refused assignment as a warning, not as a failed create", async () => {
    await mountPage({
      "GET /api/agents": json(200, []),
      "POST /api/agents": json(201, agent({ subscription: null })),
      "PUT /api/subscriptions/agents/bot": json(404, { detail: "Not found." }),
    });
    await button("New agent").trigger("click");
    await wrapper.find("#new-agent-name").setValue("bot");
    await wrapper.find("#new-agent-subscription").setValue("3");
    await wrapper.find("[data-testid=agent-form]").trigger("submit");
    await settle();
    expect(wrapper.find(".notice.warn").text()).toBe("bot was saved, but its subscription was not changed: Not found.");
    expect(row("bot").exists()).toBe(true);
  });
});

describe("AgentsPage: each agent's actions", () => {
  it("edits only what changed and unassigns the plan when None is chosen", async () => {
    const { calls } = await mountPage({
      "GET /api/agents": json(200, [agent()]),
      "PATCH /api/agents/bot": json(200, agent({ model: "opus" })),
      "DELETE /api/subscriptions/agents/bot": json(200, { agent: "bot", subscription_id: null }),
      "GET /api/agents/bot": json(200, agent({ model: "opus", subscription: null })),
    });
    await button("Edit", row("bot")).trigger("click");
    const form = wrapper.find("[data-testid=agent-form]");
    expect(form.find("h2").text()).toBe("Edit bot");
    await form.find("#agent-operator-bot-model").setValue("opus");
    await form.find("#agent-operator-bot-subscription").setValue("none");
    await form.trigger("submit");
    await settle();
    expect(calls.find((c) => c.method === "PATCH")).toMatchObject({ url: "/api/agents/bot?owner=operator", body: { model: "opus" } });
    expect(calls.find((c) => c.method === "DELETE").url).toBe("/api/subscriptions/agents/bot?owner=operator");
    expect(row("bot").text()).toContain("Unassigned");
  });

  it("stops a running agent and starts it again; a start that failed shows as the row's state", async () => {
    const { calls } = await mountPage({
      "GET /api/agents": json(200, [agent()]),
      "POST /api/agents/bot/stop": json(200, agent({ process_state: "stopped" })),
      "POST /api/agents/bot/start": json(503, agent({ process_state: "failed", process_detail: "port in use" })),
    });
    expect(button("Start", row("bot"))).toBeUndefined();
    await button("Stop", row("bot")).trigger("click");
    await settle();
    expect(calls.at(-1)).toMatchObject({ method: "POST", url: "/api/agents/bot/stop?owner=operator" });
    expect(row("bot").text()).toContain("Stopped");
    await button("Start", row("bot")).trigger("click");
    await settle();
    expect(row("bot").text()).toContain("Failed to start");
    expect(row("bot").text()).toContain("port in use");
  });

  it("deletes an agent after asking", async () => {
    const { calls } = await mountPage({ "GET /api/agents": json(200, [agent()]), "DELETE /api/agents/bot": { status: 204, body: null } });
    await button("Delete", row("bot")).trigger("click");
    expect(calls.some((c) => c.method === "DELETE")).toBe(false);
    await button("Delete bot", row("bot")).trigger("click");
    await settle();
    expect(calls.at(-1)).toMatchObject({ method: "DELETE", url: "/api/agents/bot?owner=operator" });
    expect(row("bot").exists()).toBe(false);
    expect(wrapper.find("[data-testid=agents-message]").text()).toBe("Deleted bot.");
  });

  it("links each agent to its console and its schedules, with its owner", async () => {
    await mountPage({ "GET /api/agents": json(200, [agent({ owner: "alice" })]) }, ADMIN);
    const links = Object.fromEntries(row("bot").findAll("a").map((a) => [a.text(), a.attributes("href")]));
    expect(links.Console).toBe("#/agents/bot/console?owner=alice");
    expect(links.Schedules).toBe("#/schedules?agent=bot&owner=alice");
    // Each row's buttons are described by the agent's name.
    const describedBy = button("Stop", row("bot")).attributes("aria-describedby");
    expect(wrapper.find(`#${describedBy}`).text()).toBe("bot");
  });
});

describe("AgentsPage: placement labels", () => {
  it("shows an agent's labels as lines and patches the new set", async () => {
    const before = agent({ placement: { "trinity.pool": "gpu-less" } });
    const after = { ...before, placement: { "trinity.pool": "gpu-less", zone: "eu-1" } };
    const { calls } = await mountPage({ "GET /api/agents": json(200, [before]), "PATCH /api/agents/bot": json(200, after) });
    await button("Edit", row("bot")).trigger("click");
    const field = wrapper.find("#agent-operator-bot-placement");
    expect(wrapper.find("label[for=agent-operator-bot-placement]").text()).toBe("Placement labels");
    expect(field.element.value).toBe("trinity.pool=gpu-less");
    await field.setValue("trinity.pool=gpu-less\nzone=eu-1");
    await wrapper.find("[data-testid=agent-form]").trigger("submit");
    await settle();
    expect(calls.find((c) => c.method === "PATCH")).toMatchObject({ url: "/api/agents/bot?owner=operator", body: { placement: after.placement } });
  });

  it("says what is wrong with a label before sending anything", async () => {
    const { calls } = await mountPage({ "GET /api/agents": json(200, []) });
    await button("New agent").trigger("click");
    await wrapper.find("#new-agent-name").setValue("bot");
    await wrapper.find("#new-agent-placement").setValue("trinity.pool=gpu,node.role==manager");
    await wrapper.find("[data-testid=agent-form]").trigger("submit");
    await settle();
    expect(wrapper.find("#new-agent-placement-error").text()).toMatch(/^Label "trinity.pool": the value is 1 to 63/);
    expect(wrapper.find("#new-agent-placement").attributes("aria-invalid")).toBe("true");
    expect(calls.some((c) => c.method === "POST")).toBe(false);
  });

  it("shows the server's refusal beside the field", async () => {
    await mountPage({
      "GET /api/agents": json(200, []),
      "POST /api/agents": json(400, { placement: ["At most 8 labels (9 given)."] }),
    });
    await button("New agent").trigger("click");
    await wrapper.find("#new-agent-name").setValue("bot");
    await wrapper.find("#new-agent-placement").setValue("trinity.pool=gpu-less");
    await wrapper.find("[data-testid=agent-form]").trigger("submit");
    await settle();
    expect(wrapper.find("#new-agent-placement-error").text()).toBe("At most 8 labels (9 given).");
  });
});

describe("SchedulesPage focused on one agent", () => {
  it("shows only that agent's schedules and puts its name in the form", async () => {
    mockFetch({
      "GET /api/agents": json(200, [agent(), agent({ name: "other" })]),
      "GET /api/agents/bot/schedules": json(200, [{ agent: "bot", name: "nightly", cron: "0 3 * * *", message: "m", enabled: true }]),
      "GET /api/agents/other/schedules": json(200, [{ agent: "other", name: "hourly", cron: "0 * * * *", message: "m", enabled: true }]),
    });
    wrapper = mount(SchedulesPage, { props: { user: OPERATOR, focus: { name: "other", owner: "" } } });
    await settle();
    expect(wrapper.findAll("tr[data-schedule]").map((r) => r.attributes("data-schedule"))).toEqual(["other/hourly"]);
    expect(wrapper.find("#schedule-agent").element.value).toBe("operator/other");
    expect(wrapper.find("[data-testid=schedules-focus]").text()).toContain("Showing the schedules of other");
  });
});
