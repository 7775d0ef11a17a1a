import { afterEach, describe, expect, it, vi } from "vitest";
import { mount } from "@vue/test-utils";
import SettingsPage from "./SettingsPage.vue";
import SubscriptionsPage from "./SubscriptionsPage.vue";
import AgentsPage from "./AgentsPage.vue";
import ActivityPage from "./ActivityPage.vue";
import SubscriptionDetail from "../components/SubscriptionDetail.vue";
import { ADMIN, OPERATOR, json, mockFetch, NO_ROUTE, page, settle } from "../test-utils.js";

// Chart.js needs a real canvas; the chart's own behaviour is covered in the browser.
vi.mock("chart.js", () => {
  class Chart {
    static register() {}
    destroy() {}
  }
  return { Chart, Filler: {}, Legend: {}, LinearScale: {}, LineController: {}, LineElement: {}, PointElement: {}, Tooltip: {} };
});

let wrapper;
afterEach(() => wrapper?.unmount());

const S = "/api/subscriptions/settings";
function settingsRoutes({ fallback = { enabled: true, key_configured: false } } = {}) {
  return {
    [`GET ${S}/auto-switch`]: json(200, { enabled: true }),
    [`GET ${S}/api-key-fallback`]: json(200, fallback),
    [`GET ${S}/headroom-auto-refresh`]: json(200, { enabled: false }),
    [`GET ${S}/headroom-alert-threshold`]: json(200, { threshold: 75 }),
    "GET /api/settings/platform-api-key": json(200, { configured: false, fingerprint: "" }),
  };
}

describe("SettingsPage", () => {
  it("says the fallback is inert when it is on and no key is configured", async () => {
    mockFetch(settingsRoutes());
    wrapper = mount(SettingsPage, { props: { user: ADMIN } });
    await settle();
    expect(wrapper.find("[data-testid=fallback-inert]").text()).toBe("On but inert: no key configured");
    // The help texts say what the walk does now, not that it is still to come.
    const help = wrapper.find("#setting-auto-switch-help").text();
    expect(help).toContain("the switch happens on the first failure, inside the same turn");
    expect(help).toContain("The subscription that served is committed once");
    const fallbackHelp = wrapper.find("#setting-api-key-fallback-help").text();
    expect(fallbackHelp).toContain("The last rung, billed per token.");
    expect(fallbackHelp).toContain("A turn served by the key changes no assignment");
    expect(wrapper.text()).not.toMatch(/not active yet|not built|comes with the credential walk/i);
  });

  it("does not call a fallback inert once a key exists", async () => {
    mockFetch(settingsRoutes({ fallback: { enabled: true, key_configured: true } }));
    wrapper = mount(SettingsPage, { props: { user: ADMIN } });
    await settle();
    expect(wrapper.find("[data-testid=fallback-inert]").exists()).toBe(false);
  });

  it("saves a toggle through the API and shows the server's answer", async () => {
    const { calls } = mockFetch({ ...settingsRoutes(), [`PUT ${S}/auto-switch`]: json(200, { enabled: false }) });
    wrapper = mount(SettingsPage, { props: { user: ADMIN } });
    await settle();
    const toggle = wrapper.find("#setting-auto-switch");
    expect(toggle.attributes("role")).toBe("switch");
    expect(toggle.element.checked).toBe(true);
    await toggle.setValue(false);
    await settle();
    expect(calls.at(-1)).toMatchObject({ method: "PUT", url: `${S}/auto-switch`, body: { enabled: false } });
    expect(wrapper.find("#setting-auto-switch").element.checked).toBe(false);
  });

  it("puts a refused toggle back and says why", async () => {
    mockFetch({ ...settingsRoutes(), [`PUT ${S}/auto-switch`]: json(403, { detail: "Only an admin can change this." }) });
    wrapper = mount(SettingsPage, { props: { user: ADMIN } });
    await settle();
    await wrapper.find("#setting-auto-switch").setValue(false);
    await settle();
    expect(wrapper.find("#setting-auto-switch").element.checked).toBe(true);
    expect(wrapper.text()).toContain("Not saved: Only an admin can change this.");
  });

  it.each([["49"], ["100"], ["abc"]])("refuses threshold %s before sending it", async (value) => {
    const { calls } = mockFetch(settingsRoutes());
    wrapper = mount(SettingsPage, { props: { user: ADMIN } });
    await settle();
    await wrapper.find("#alert-threshold").setValue(value);
    await wrapper.find("#alert-threshold").element.form.dispatchEvent(new Event("submit"));
    await settle();
    expect(wrapper.find("#alert-threshold-error").text()).not.toBe("");
    expect(calls.filter((c) => c.method === "PUT")).toHaveLength(0);
  });

  it("sets the platform key, then forgets it and shows only its fingerprint", async () => {
    const KEY = "sk-ant-api03-" + "k".repeat(40);
    const { calls } = mockFetch({
      ...settingsRoutes(),
      "PUT /api/settings/platform-api-key": json(200, { configured: true, fingerprint: "kkkk" }),
    });
    wrapper = mount(SettingsPage, { props: { user: ADMIN } });
    await settle();
    await wrapper.find("#platform-key").setValue(KEY);
    await wrapper.find("#platform-key").element.form.dispatchEvent(new Event("submit"));
    await settle();
    expect(calls.find((c) => c.method === "PUT").body).toEqual({ key: KEY });
    expect(wrapper.find("#platform-key").element.value).toBe("");
    expect(wrapper.find("[data-testid=key-status]").text()).toContain("…kkkk");
    expect(wrapper.html()).not.toContain(KEY);
  });

  it("says which key refused and when it reopens, and retries it now", async () => {
    const later = new Date(Date.now() + 2 * 3600 * 1000).toISOString();
    const refused = { configured: true, fingerprint: "kkkk", refusal: { fingerprint: "kkkk", failure_kind: "auth", refused_at: new Date().toISOString(), reopens_at: later } };
    const { calls } = mockFetch({
      ...settingsRoutes(),
      "GET /api/settings/platform-api-key": json(200, refused),
      "POST /api/settings/platform-api-key/retry": json(200, { credential: "api_key", name: "platform API key", fingerprint: "kkkk", cleared: 1, probe: "" }),
    });
    wrapper = mount(SettingsPage, { props: { user: ADMIN } });
    await settle();
    expect(wrapper.find("[data-testid=key-refusal]").text()).toContain("Key …kkkk refused");
    expect(wrapper.find("[data-testid=key-refusal]").text()).toMatch(/reopens in (1 h 59 min|2 h)/);
    await wrapper.find("[data-testid=key-retry]").trigger("click");
    await settle();
    expect(calls.some((c) => c.method === "POST" && c.url === "/api/settings/platform-api-key/retry")).toBe(true);
    expect(wrapper.find("[data-testid=key-retry-result]").text()).toBe(
      "Retried key …kkkk: 1 refusal(s) cleared; the next turn may use it.",
    );
  });

  it("keeps the threshold and key forms shut until each holds the server's state", async () => {
    // A save made while a first read was in flight would be overwritten by its older answer.
    // The key's section reads its own state, so each form waits for its own read only.
    let releaseThreshold;
    let releaseKey;
    const threshold = new Promise((resolve) => (releaseThreshold = resolve));
    const key = new Promise((resolve) => (releaseKey = resolve));
    mockFetch({
      ...settingsRoutes(),
      [`GET ${S}/headroom-alert-threshold`]: () => threshold.then(() => json(200, { threshold: 75 })),
      "GET /api/settings/platform-api-key": () => key.then(() => json(200, { configured: false, fingerprint: "" })),
    });
    wrapper = mount(SettingsPage, { props: { user: ADMIN } });
    await settle();
    expect(wrapper.find("#platform-key").element.disabled).toBe(true);
    expect(wrapper.find("#alert-threshold").element.disabled).toBe(true);
    releaseThreshold();
    await settle();
    expect(wrapper.find("#alert-threshold").element.disabled).toBe(false);
    expect(wrapper.find("#platform-key").element.disabled).toBe(true);
    releaseKey();
    await settle();
    expect(wrapper.find("#platform-key").element.disabled).toBe(false);
  });

  it("shows a non-admin the state without any control, and never asks for the key", async () => {
    const { calls } = mockFetch(settingsRoutes());
    wrapper = mount(SettingsPage, { props: { user: OPERATOR } });
    await settle();
    expect(wrapper.findAll("input, select, button[type=submit]")).toHaveLength(0);
    expect(wrapper.find("[data-testid=platform-key-section]").exists()).toBe(false);
    expect(wrapper.find("[data-testid=threshold-readonly]").text()).toBe("Alerts at 75%.");
    expect(calls.some((c) => c.url.includes("platform-api-key"))).toBe(false);
  });
});

const SUBS = [
  { id: 1, name: "max-main", provider: "anthropic", plan_type: "max-20x", token_fingerprint: "Ab12", overage: "refuse", agent_count: 1, agents: [{ name: "researcher", owner: "root" }] },
  { id: 2, name: "codex", provider: "openai-codex", plan_type: "plus", token_fingerprint: "Cd34", overage: "refuse", agent_count: 0, agents: [] },
];
const AGENTS = [
  { name: "researcher", owner: "root", runtime: "claude-code", model: "", subscription: { id: 1, name: "max-main" }, use_platform_api_key: true, routing_policy: "subscription_first" },
  { name: "idle", owner: "root", runtime: "claude-code", model: "", subscription: null, use_platform_api_key: true, routing_policy: "subscription_first" },
];

describe("SubscriptionsPage", () => {
  it("retries a subscription now for an admin and says what the probe read", async () => {
    const { calls } = mockFetch({
      "GET /api/subscriptions": json(200, SUBS),
      "GET /api/agents": json(200, AGENTS),
      [`POST /api/subscriptions/${SUBS[0].id}/retry`]: json(200, { credential: "subscription", name: SUBS[0].name, fingerprint: "Ab12", cleared: 2, probe: "ok" }),
    });
    wrapper = mount(SubscriptionsPage, { props: { user: ADMIN } });
    await settle();
    await wrapper.find(`[data-testid=retry-${SUBS[0].id}]`).trigger("click");
    await settle();
    expect(calls.some((c) => c.method === "POST" && c.url === `/api/subscriptions/${SUBS[0].id}/retry`)).toBe(true);
    expect(wrapper.find("[role=status]").text()).toBe(`Retried ${SUBS[0].name}: 2 refusal(s) cleared; it serves (fresh reading).`);
  });

  it("pauses a subscription for an admin and says what that means", async () => {
    const paused = { ...SUBS[0], paused_at: "2030-01-01T11:00:00Z", paused_by: "root" };
    const { calls } = mockFetch({
      "GET /api/subscriptions": json(200, SUBS),
      "GET /api/agents": json(200, AGENTS),
      [`PATCH /api/subscriptions/${SUBS[0].id}`]: json(200, paused),
    });
    wrapper = mount(SubscriptionsPage, { props: { user: ADMIN } });
    await settle();
    const button = wrapper.find(`[data-testid=pause-${SUBS[0].id}]`);
    expect(button.text()).toBe("Pause");
    expect(button.attributes("aria-label")).toBe(`Pause ${SUBS[0].name}`);
    await button.trigger("click");
    await settle();
    const patch = calls.find((c) => c.method === "PATCH");
    expect(patch.url).toBe(`/api/subscriptions/${SUBS[0].id}`);
    expect(patch.body).toEqual({ paused: true });
    expect(wrapper.find("[role=status]").text()).toBe(
      `Paused ${SUBS[0].name}: no turn, walk or placement uses it until it is resumed. Its agents' next turns run on the best plan they may use.`
    );
  });

  it("shows a paused subscription, who paused it, and offers to resume it", async () => {
    const paused = { ...SUBS[0], paused_at: new Date(Date.now() - 5 * 60_000).toISOString(), paused_by: "root" };
    const { calls } = mockFetch({
      "GET /api/subscriptions": json(200, [paused, SUBS[1]]),
      "GET /api/agents": json(200, AGENTS),
      [`PATCH /api/subscriptions/${SUBS[0].id}`]: json(200, { ...paused, paused_at: null, paused_by: "" }),
    });
    wrapper = mount(SubscriptionsPage, { props: { user: ADMIN } });
    await settle();
    const [first, second] = wrapper.findAll("tr[data-subscription]");
    expect(first.find("[data-testid=paused]").text()).toBe("Paused");
    expect(first.find("[data-testid=paused-by]").text()).toMatch(/^paused by root 5 min(utes)? ago: no turn uses it$/);
    expect(second.find("[data-testid=paused]").exists()).toBe(false);
    await first.find(`[data-testid=pause-${SUBS[0].id}]`).trigger("click");
    await settle();
    expect(calls.find((c) => c.method === "PATCH").body).toEqual({ paused: false });
    expect(wrapper.find("[role=status]").text()).toBe(`Resumed ${SUBS[0].name}: turns may use it again.`);
  });

  it("offers no retry and no pause to an operator, and still shows a pause", async () => {
    const paused = { ...SUBS[0], paused_at: "2030-01-01T11:00:00Z", paused_by: "root" };
    mockFetch({ "GET /api/subscriptions": json(200, [paused]), "GET /api/agents": json(200, AGENTS) });
    wrapper = mount(SubscriptionsPage, { props: { user: OPERATOR } });
    await settle();
    expect(wrapper.find(`[data-testid=pause-${SUBS[0].id}]`).exists()).toBe(false);
    expect(wrapper.find("[data-testid=paused]").text()).toBe("Paused");
  });

  it("offers no retry to an operator", async () => {
    mockFetch({ "GET /api/subscriptions": json(200, SUBS), "GET /api/agents": json(200, AGENTS) });
    wrapper = mount(SubscriptionsPage, { props: { user: OPERATOR } });
    await settle();
    expect(wrapper.find(`[data-testid=retry-${SUBS[0].id}]`).exists()).toBe(false);
  });

  it("lists subscriptions with fingerprints and says once that usage is not available", async () => {
    mockFetch({ "GET /api/subscriptions": json(200, SUBS), "GET /api/agents": json(200, AGENTS) });
    wrapper = mount(SubscriptionsPage, { props: { user: ADMIN } });
    await settle();
    const rows = wrapper.findAll("tr[data-subscription]");
    expect(rows.map((r) => r.find("[data-testid=fingerprint]").text())).toEqual(["token …Ab12", "token …Cd34"]);
    expect(wrapper.findAll("[data-testid=usage-unavailable]")).toHaveLength(1);
    expect(wrapper.findAll("[role=meter]")).toHaveLength(0);
    expect(wrapper.text()).not.toMatch(/\d+% used/);
  });

  it("shows the fleet view's live bars, and splits failures by kind only where there were some", async () => {
    const headroom = {
      state: "reading", tier: "measured", gate: "usable", status: "ok", fetched_at: new Date().toISOString(), age_seconds: 0,
      windows: { five_hour: { utilization: 30, resets_at: null, status: "allowed" } },
    };
    const { calls } = mockFetch({
      "GET /api/subscriptions": json(200, SUBS),
      "GET /api/agents": json(200, AGENTS),
      "GET /api/agents/subscription-pressure": json(200, {
        store: "ok",
        summary: {},
        subscriptions: [
          { id: 1, name: "max-main", headroom, rate_limited_now: false, rate_limited_source: "reading", failures_24h: 0 },
          { id: 2, name: "codex", headroom: { ...headroom, gate: "stale" }, rate_limited_now: true, rate_limited_source: "events", failures_24h: 3 },
        ],
      }),
      "GET /api/subscriptions/2/usage": json(200, {
        headroom: { ...headroom, gate: "stale" }, failures_24h: { rate_limit: 2, auth: 1, unknown: 0 }, rate_limited_now: true,
      }),
    });
    wrapper = mount(SubscriptionsPage, { props: { user: ADMIN } });
    await settle();
    const [first, second] = wrapper.findAll("tr[data-subscription]");
    expect(first.find("[role=meter]").attributes("aria-valuenow")).toBe("30");
    expect(first.text()).toContain("No failure events (24h)");
    expect(first.text()).toContain("Probe OK");
    expect(second.findAll("[role=meter]")).toHaveLength(0);
    expect(second.find("[data-testid=rate-limited-chip]").exists()).toBe(true);
    expect(second.text()).toContain("3 failure events (24h): 2 rate limit, 1 credential refused");
    expect(calls.filter((c) => c.url.endsWith("/usage")).map((c) => c.url)).toEqual(["/api/subscriptions/2/usage"]);
  });

  it("asks before deleting, and deletes only on confirmation", async () => {
    const { calls } = mockFetch({
      "GET /api/subscriptions": json(200, SUBS),
      "GET /api/agents": json(200, AGENTS),
      "DELETE /api/subscriptions/1": { status: 204, body: null },
    });
    wrapper = mount(SubscriptionsPage, { props: { user: ADMIN }, attachTo: document.body });
    await settle();
    const deleteButton = wrapper.find("button[aria-label='Delete max-main']");
    await deleteButton.trigger("click");
    await settle();
    const dialog = wrapper.find("[role=alertdialog]");
    expect(dialog.text()).toContain("Delete max-main? Its 1 agent become unassigned.");
    expect(document.activeElement.id).toBe("cancel-delete-1");
    expect(calls.some((c) => c.method === "DELETE")).toBe(false);
    await dialog.findAll("button").find((b) => b.text() === "Delete max-main").trigger("click");
    await settle();
    expect(calls.filter((c) => c.method === "DELETE").map((c) => c.url)).toEqual(["/api/subscriptions/1"]);
  });

  it("hides add, rotate and delete from a non-admin", async () => {
    mockFetch({ "GET /api/subscriptions": json(200, SUBS), "GET /api/agents": json(200, AGENTS) });
    wrapper = mount(SubscriptionsPage, { props: { user: OPERATOR } });
    await settle();
    const labels = wrapper.findAll("button").map((b) => b.attributes("aria-label") ?? b.text());
    expect(labels.some((l) => /Add subscription|Rotate|Delete/.test(l))).toBe(false);
    expect(labels.some((l) => l.startsWith("Details"))).toBe(true);
  });

  it("tells an admin with no subscriptions what to do next", async () => {
    mockFetch({ "GET /api/subscriptions": json(200, []), "GET /api/agents": json(200, []) });
    wrapper = mount(SubscriptionsPage, { props: { user: ADMIN } });
    await settle();
    expect(wrapper.text()).toContain("No subscriptions yet");
    expect(wrapper.text()).toContain("claude setup-token");
  });

  it("offers a retry when the list can't be loaded", async () => {
    mockFetch({ "GET /api/subscriptions": json(500, null), "GET /api/agents": json(200, []) });
    wrapper = mount(SubscriptionsPage, { props: { user: ADMIN } });
    await settle();
    expect(wrapper.find("[role=alert]").text()).toContain("The server failed (HTTP 500)");
    expect(wrapper.find("[role=alert] button").text()).toBe("Try again");
  });
});

describe("SubscriptionDetail", () => {
  const props = { subscription: SUBS[0], agents: AGENTS, usage: { state: "missing" }, now: Date.now() };

  it("assigns and unassigns agents through the assignment API", async () => {
    const { calls } = mockFetch({
      "PUT /api/subscriptions/agents/idle?owner=root": json(200, { agent: "idle", subscription_id: 1 }),
      "DELETE /api/subscriptions/agents/researcher?owner=root": json(200, { agent: "researcher", subscription_id: null }),
    });
    wrapper = mount(SubscriptionDetail, { props });
    await settle();
    // Names are per owner: the choice is the agent (owner/name), and the owner goes along.
    await wrapper.find("#assign-1").setValue("root/idle");
    await wrapper.find("#assign-1").element.form.dispatchEvent(new Event("submit"));
    await settle();
    await wrapper.find("button[aria-label='Unassign researcher from max-main']").trigger("click");
    await settle();
    const writes = calls.filter((c) => c.method !== "GET");
    expect(writes).toEqual([
      expect.objectContaining({ method: "PUT", url: "/api/subscriptions/agents/idle?owner=root", body: { subscription_id: 1 } }),
      expect.objectContaining({ method: "DELETE", url: "/api/subscriptions/agents/researcher?owner=root" }),
    ]);
    expect(wrapper.emitted("changed")).toHaveLength(2);
  });

  it("shows each agent's turns served from the usage API's observed figures", async () => {
    mockFetch({});
    const usage = { state: "ok", data: { observed: { per_agent: [{ name: "researcher", owner: "root", turns: 7 }] } } };
    wrapper = mount(SubscriptionDetail, { props: { ...props, usage } });
    await settle();
    expect(wrapper.text()).toContain("researcher");
    expect(wrapper.text()).toContain("7 turns served (7 d)");
  });

  it("tells two owners' agents of one name apart and unassigns exactly the one clicked", async () => {
    // An admin's view: alice's and bob's "bot" both run on max-main.
    const bots = [
      { ...AGENTS[0], name: "bot", owner: "alice", process_state: "running" },
      { ...AGENTS[0], name: "bot", owner: "bob", process_state: "stopped" },
    ];
    const subscription = { ...SUBS[0], agent_count: 2, agents: bots.map(({ name, owner }) => ({ name, owner })) };
    const usage = { state: "ok", data: { observed: { per_agent: [{ name: "bot", owner: "bob", turns: 3 }] } } };
    const { calls } = mockFetch({
      "DELETE /api/subscriptions/agents/bot?owner=bob": json(200, { agent: "bot", subscription_id: null }),
    });
    wrapper = mount(SubscriptionDetail, { props: { ...props, subscription, agents: bots, usage, showOwner: true } });
    await settle();
    const alice = wrapper.find("li[data-agent='alice/bot']");
    const bob = wrapper.find("li[data-agent='bob/bot']");
    expect(alice.text()).toContain("bot (alice) · running · 0 turns served (7 d)");
    expect(bob.text()).toContain("bot (bob) · stopped · 3 turns served (7 d)");
    await wrapper.find("button[aria-label='Unassign bot (bob) from max-main']").trigger("click");
    await settle();
    expect(calls.filter((c) => c.method !== "GET")).toEqual([
      expect.objectContaining({ method: "DELETE", url: "/api/subscriptions/agents/bot?owner=bob" }),
    ]);
    expect(wrapper.find("[role=alert]").exists()).toBe(false);
  });

  it("says when the 60 s floor refused a refresh and holds the button until it passes", async () => {
    const detail = "Usage was read 20 s ago; it can be refreshed at most once every 60 s. Try again in 40 s.";
    mockFetch({
      "POST /api/subscriptions/1/usage/refresh": { ...json(429, { detail }), headers: { "retry-after": "40" } },
    });
    wrapper = mount(SubscriptionDetail, { props });
    await settle();
    const button = () => wrapper.findAll("button").find((b) => b.text().startsWith("Refresh now"));
    await button().trigger("click");
    await settle();
    expect(wrapper.find("[role=status]").text()).toBe(`Not probed: ${detail}`);
    await wrapper.setProps({ now: Date.now() });
    expect(button().attributes("disabled")).toBeDefined();
    expect(button().text()).toMatch(/Refresh now \(in (39|40) s\)/);
    await wrapper.setProps({ now: Date.now() + 41_000 });
    expect(button().attributes("disabled")).toBeUndefined();
  });

  it("hands a fresh reading back to the table after a refresh", async () => {
    const body = { headroom: { state: "reading", gate: "usable", status: "ok", windows: {} }, failures_24h: {} };
    mockFetch({ "POST /api/subscriptions/1/usage/refresh": json(200, body) });
    wrapper = mount(SubscriptionDetail, { props });
    await settle();
    await wrapper.findAll("button").find((b) => b.text() === "Refresh now").trigger("click");
    await settle();
    expect(wrapper.emitted("refreshed")[0][0]).toEqual(body);
    expect(wrapper.find("[role=status]").text()).toContain("Read just now");
  });

  it("says refresh is unavailable when the server has no such endpoint", async () => {
    mockFetch({});
    wrapper = mount(SubscriptionDetail, { props });
    await settle();
    await wrapper.findAll("button").find((b) => b.text() === "Refresh now").trigger("click");
    await settle();
    expect(wrapper.text()).toContain("Refresh is not available");
    expect(wrapper.text()).toContain("Usage history not available");
  });
});

describe("AgentsPage", () => {
  /** Mount the page on these agents and subscriptions, with a platform key configured. */
  async function mountAgents(agents, { subscriptions = SUBS, user = ADMIN } = {}) {
    const fetched = mockFetch({
      "GET /api/agents": json(200, agents),
      "GET /api/subscriptions": json(200, subscriptions),
      [`GET ${S}/api-key-fallback`]: json(200, { enabled: true, key_configured: true }),
    });
    wrapper = mount(AgentsPage, { props: { user } });
    await settle();
    return fetched;
  }

  it("shows each agent's state and derives its route from its own fields", async () => {
    const agents = [
      { ...AGENTS[0], process_state: "running", process_detail: "" },
      { ...AGENTS[1], process_state: "failed", process_detail: "the agent server did not start" },
    ];
    await mountAgents(agents);
    const researcher = wrapper.find("tr[data-agent=researcher]");
    expect(researcher.text()).toContain("Running");
    expect(researcher.text()).toContain("Subscription max-main");
    const idle = wrapper.find("tr[data-agent=idle]");
    expect(idle.text()).toContain("Failed to start");
    expect(idle.text()).toContain("the agent server did not start");
    expect(idle.text()).toContain("Platform API key");
    expect(researcher.find("[data-testid=last-switch]").text()).toBe("Never switched");
  });

  it("warns about the agents whose CLI runs as the platform's own OS user, and only those", async () => {
    const agents = [
      { ...AGENTS[0], process_state: "running", process_detail: "", isolation: "same-user" },
      { ...AGENTS[1], process_state: "running", process_detail: "", isolation: "separate-user" },
    ];
    await mountAgents(agents);
    const notice = wrapper.find("[data-testid=weak-isolation]");
    expect(notice.exists()).toBe(true);
    // An admin's notice names each agent with its owner.
    expect(notice.text()).toContain("researcher (root) runs its CLI as the platform's own OS user");
    expect(notice.text()).not.toContain("idle");
    expect(wrapper.find("tr[data-agent=researcher]").text()).toContain("Weak isolation");
    expect(wrapper.find("tr[data-agent=idle]").text()).not.toContain("Weak isolation");
  });

  it("says which agents run without a sandbox, apart from the weak ones", async () => {
    await mountAgents([{ ...AGENTS[0], process_state: "running", process_detail: "", isolation: "separate-user" }]);
    expect(wrapper.find("[data-testid=weak-isolation]").exists()).toBe(false);
    const notice = wrapper.find("[data-testid=no-sandbox]");
    expect(notice.exists()).toBe(true);
    expect(notice.text()).toContain("researcher (root) runs its CLI as an OS user of its own but outside a sandbox");
    expect(wrapper.find("tr[data-agent=researcher]").text()).toContain("No sandbox");
  });

  it("warns about no docker agent: its container contains it", async () => {
    await mountAgents([
      { ...AGENTS[0], runtime: "claude-code", process_state: "running", process_detail: "", isolation: "container" },
      { ...AGENTS[1], process_state: "running", process_detail: "", isolation: "separate-user" },
    ]);
    const notice = wrapper.find("[data-testid=no-sandbox]");
    expect(notice.text()).toContain("idle (root) runs its CLI");
    expect(notice.text()).not.toContain("researcher");
    expect(wrapper.find("tr[data-agent=researcher]").text()).not.toContain("No sandbox");
    expect(wrapper.find("tr[data-agent=researcher]").text()).not.toContain("Weak isolation");
  });

  it("shows no isolation warning when every agent runs in its sandbox", async () => {
    await mountAgents([{ ...AGENTS[0], process_state: "running", process_detail: "", isolation: "sandbox" }]);
    expect(wrapper.find("[data-testid=weak-isolation]").exists()).toBe(false);
    expect(wrapper.find("[data-testid=no-sandbox]").exists()).toBe(false);
    expect(wrapper.find("tr[data-agent=researcher]").text()).not.toContain("No sandbox");
  });

  it("shows each agent's last switch, why, and since when it bills the platform key", async () => {
    const at = new Date(Date.now() - 5 * 60_000).toISOString();
    const explanation =
      "max-main refused; the turn was served here because no fresh headroom reading was available for it; it was chosen by load order.";
    const agents = [
      {
        ...AGENTS[0], process_state: "running", process_detail: "", subscription: { id: 2, name: "codex" },
        last_switch: {
          from: 1, from_name: "max-main", to: 2, to_name: "codex",
          why: { why: "ranked", refused: "max-main refused", tier: "unknown" }, explanation, at,
        },
        on_api_key_since: null,
      },
      { ...AGENTS[1], process_state: "running", process_detail: "", last_switch: {}, on_api_key_since: "2026-11-30T10:00:00Z" },
    ];
    await mountAgents(agents);
    const cell = wrapper.find("tr[data-agent=researcher] [data-testid=last-switch]");
    expect(cell.find("strong").text()).toBe("max-main → codex");
    expect(cell.find("[data-testid=switch-reason]").text()).toBe(explanation);
    expect(cell.text()).toContain("(5 min ago)");
    const idle = wrapper.find("tr[data-agent=idle]");
    expect(idle.find("[data-testid=last-switch]").text()).toContain("Never switched");
    expect(idle.find("[data-testid=on-api-key]").text()).toContain("On the platform API key since");
  });

  it("names a switch's origin from last_switch alone when the operator can no longer list it", async () => {
    const agents = [
      {
        ...AGENTS[0], process_state: "running", process_detail: "", subscription: { id: 2, name: "codex" },
        last_switch: {
          from: 1, from_name: "max-main", to: 2, to_name: "codex", why: { why: "ranked", refused: "max-main refused" },
          explanation: "max-main refused; the turn was served here because it was readmitted (window reset).", at: "2026-11-30T10:00:00Z",
        },
      },
    ];
    // A non-admin lists only the subscriptions their agents use now.
    const { calls } = await mountAgents(agents, { subscriptions: [SUBS[1]], user: OPERATOR });
    expect(wrapper.find("[data-testid=last-switch] strong").text()).toBe("max-main → codex");
    // The page needs no turn history to name a switch.
    expect(calls.some((c) => c.url.startsWith("/api/executions"))).toBe(false);
  });

  it("gives an admin one row per owner's agent of a name, each addressed with its owner", async () => {
    const bots = [
      { ...AGENTS[0], name: "bot", owner: "alice", process_state: "running", process_detail: "" },
      { ...AGENTS[0], name: "bot", owner: "bob", process_state: "running", process_detail: "" },
    ];
    const { calls } = mockFetch({
      "GET /api/agents": json(200, bots),
      "GET /api/subscriptions": json(200, SUBS),
      [`GET ${S}/api-key-fallback`]: json(200, { enabled: true, key_configured: true }),
      // Only the URL matters here: the explanation itself is routing.test.js's.
      "GET /api/agents/bot/routing?owner=bob": json(503, { detail: "not now" }),
    });
    wrapper = mount(AgentsPage, { props: { user: ADMIN } });
    await settle();
    const rows = wrapper.findAll("tr[data-agent=bot]");
    expect(rows.map((r) => r.attributes("data-owner"))).toEqual(["alice", "bob"]);
    await rows[1].find("[data-testid=routing-explain] button").trigger("click");
    await settle();
    expect(calls.at(-1).url).toBe("/api/agents/bot/routing?owner=bob");
  });

  it("explains how to create the first agent", async () => {
    mockFetch({ "GET /api/agents": json(200, []), "GET /api/subscriptions": json(200, []), [`GET ${S}/api-key-fallback`]: json(200, { enabled: true, key_configured: false }) });
    wrapper = mount(AgentsPage, { props: { user: OPERATOR } });
    await settle();
    expect(wrapper.text()).toContain("You have no agents.");
    expect(wrapper.text()).toContain("POST /api/agents");
  });
});

describe("ActivityPage", () => {
  const EXECUTIONS = [
    {
      id: "e1", agent_name: "researcher", trigger: "api", status: "failed", error_code: "billing",
      error_detail: "Tried: max-main (rate limit); every candidate refused.", walk_stop: "exhausted", earliest_reset: null,
      served_by_kind: "", served_by_subscription: null, subscription_switch: null, input_tokens: 0, output_tokens: 0, created_at: "2026-11-30T10:00:00Z",
      attempts: [{ credential_kind: "subscription", subscription_id: 1, fingerprint: "Ab12", why: "assigned", outcome: "refused", error_code: "rate_limit", status_code: 429 }],
    },
    {
      id: "e2", agent_name: "researcher", trigger: "api", status: "succeeded", error_code: "", error_detail: "",
      served_by_kind: "api_key", served_by_subscription: null, input_tokens: 12, output_tokens: 30, created_at: "2026-11-30T09:00:00Z",
      attempts: [{ credential_kind: "api_key", subscription_id: null, fingerprint: "kkkk", why: "api_key", outcome: "served", error_code: null, status_code: 200 }],
    },
    {
      id: "e3", agent_name: "researcher", trigger: "api", status: "succeeded", error_code: "", error_detail: "", walk_stop: "",
      served_by_kind: "subscription", served_by_subscription: { id: 2, name: "codex" }, input_tokens: 5, output_tokens: 5, created_at: "2026-11-30T08:00:00Z",
      subscription_switch: {
        from: 1, from_name: "max-main", to: 2, to_name: "codex", kind: "subscription", why: { why: "ranked", refused: "max-main refused" },
        explanation: "max-main refused; the turn was served here because no fresh headroom reading was available for it; it was chosen by load order.",
        attempts: 2, committed: true,
      },
      attempts: [
        { credential_kind: "subscription", subscription_id: 1, name: "max-main", fingerprint: "Ab12", why: "assigned", outcome: "refused", error_code: "auth", status_code: 401 },
        { credential_kind: "subscription", subscription_id: 2, name: "codex", fingerprint: "Cd34", why: "ranked", outcome: "served", error_code: "", status_code: 200 },
      ],
    },
  ];
  const base = {
    "GET /api/agents": json(200, AGENTS),
    "GET /api/subscriptions": json(200, SUBS),
    "GET /api/notifications": json(200, page([])),
  };

  it("lists executions with status, error code, credential and trail", async () => {
    mockFetch({ ...base, "GET /api/executions": json(200, page(EXECUTIONS)) });
    wrapper = mount(ActivityPage);
    await settle();
    const failed = wrapper.find("tr[data-execution=e1]");
    expect(failed.text()).toContain("billing");
    expect(failed.text()).toContain("Tried: max-main (rate limit); every candidate refused.");
    expect(failed.text()).toContain("Not served");
    // An attempt recorded without a name is named from the subscription list.
    expect(failed.find("ol li").text()).toBe("max-main …Ab12 · its assigned subscription: refused rate_limit, HTTP 429");
    expect(failed.find("[data-testid=walk-stop]").text()).toBe("Every candidate refused.");
    const served = wrapper.find("tr[data-execution=e2]");
    expect(served.text()).toContain("Platform API key");
    expect(served.text()).toContain("12 in / 30 out tokens");
    expect(served.find("ol li").text()).toContain("platform API key");
  });

  it("shows a switched turn's trail in order and the switch it committed", async () => {
    mockFetch({ ...base, "GET /api/executions": json(200, page(EXECUTIONS)) });
    wrapper = mount(ActivityPage);
    await settle();
    const row = wrapper.find("tr[data-execution=e3]");
    expect(row.find("td[data-label='Served by']").text()).toContain("Subscription codex");
    const steps = row.findAll("ol li");
    expect(steps.map((li) => li.attributes("data-outcome"))).toEqual(["refused", "served"]);
    expect(steps[0].text()).toContain("auth, HTTP 401");
    expect(steps[1].text()).toContain("next best by headroom");
    expect(row.find("[data-testid=switch]").text()).toBe("Switched max-main → codex. The agent now runs on codex.");
    expect(row.find("[data-testid=switch-reason]").text()).toBe(
      "max-main refused; the turn was served here because no fresh headroom reading was available for it; it was chosen by load order.",
    );
  });

  it("filters on the server and says when nothing matches", async () => {
    const { calls } = mockFetch({
      ...base,
      "GET /api/executions": json(200, page(EXECUTIONS)),
      "GET /api/executions?status=failed": json(200, page([])),
    });
    wrapper = mount(ActivityPage);
    await settle();
    await wrapper.find("#filter-status").setValue("failed");
    await settle();
    expect(calls.map((c) => c.url)).toContain("/api/executions?status=failed");
    expect(wrapper.find("[data-testid=no-executions]").text()).toContain("No execution matches these filters");
  });

  it("tells an admin two owners' agents of one name apart, in the filter and the lists", async () => {
    const bots = [
      { ...AGENTS[0], name: "bot", owner: "alice" },
      { ...AGENTS[0], name: "bot", owner: "bob" },
    ];
    const turn = (id, owner) => ({ ...EXECUTIONS[1], id, agent_name: "bot", agent_owner: owner });
    const note = { id: 5, kind: "k", level: "info", title: "switched", body: "", agent_name: "bot", agent_owner: "bob", created_at: "2026-11-30T10:00:00Z" };
    const { calls } = mockFetch({
      ...base,
      "GET /api/agents": json(200, bots),
      "GET /api/notifications": json(200, page([note])),
      "GET /api/executions": json(200, page([turn("a1", "alice"), turn("b1", "bob")])),
      "GET /api/executions?agent=bot&owner=bob": json(200, page([turn("b1", "bob")])),
    });
    wrapper = mount(ActivityPage, { props: { user: ADMIN } });
    await settle();
    const options = wrapper.findAll("#filter-agent option").map((o) => [o.attributes("value"), o.text()]);
    expect(options).toEqual([["", "All agents"], ["alice/bot", "bot (alice)"], ["bob/bot", "bot (bob)"]]);
    expect(wrapper.find("tr[data-execution=a1] td[data-label=Agent]").text()).toBe("bot (alice)");
    expect(wrapper.find("li[data-kind=k]").text()).toContain("bot (bob)");
    await wrapper.find("#filter-agent").setValue("bob/bot");
    await settle();
    expect(calls.at(-1).url).toBe("/api/executions?agent=bot&owner=bob");
    expect(wrapper.findAll("tr[data-execution]").map((r) => r.attributes("data-execution"))).toEqual(["b1"]);
  });

  it("pages to older executions with the filters kept, and stops at the end", async () => {
    const older = [{ ...EXECUTIONS[1], id: "e9", created_at: "2026-11-29T08:00:00Z" }];
    const { calls } = mockFetch({
      ...base,
      "GET /api/executions": json(200, page(EXECUTIONS)),
      "GET /api/executions?status=failed": json(200, page(EXECUTIONS.slice(0, 1), "http://testserver/api/executions?cursor=abc&status=failed")),
      "GET /api/executions?status=failed&cursor=abc": json(200, page(older)),
    });
    wrapper = mount(ActivityPage);
    await settle();
    expect(wrapper.find("[data-testid=older-executions]").exists()).toBe(false);
    await wrapper.find("#filter-status").setValue("failed");
    await settle();
    await wrapper.find("[data-testid=older-executions]").trigger("click");
    await settle();
    expect(calls.at(-1).url).toBe("/api/executions?status=failed&cursor=abc");
    expect(wrapper.findAll("tr[data-execution]").map((r) => r.attributes("data-execution"))).toEqual(["e1", "e9"]);
    expect(wrapper.find("[data-testid=older-executions]").exists()).toBe(false);
  });

  it("pages to older notifications", async () => {
    const note = (id) => ({ id, kind: `k${id}`, level: "info", title: `n${id}`, body: "", agent_name: "", created_at: "2026-11-30T10:00:00Z", read_at: "2026-11-30T10:00:00Z" });
    const { calls } = mockFetch({
      ...base,
      "GET /api/executions": json(200, page([])),
      "GET /api/notifications": json(200, page([note(9)], "/api/notifications?cursor=xyz")),
      "GET /api/notifications?cursor=xyz": json(200, page([note(4)])),
    });
    wrapper = mount(ActivityPage);
    await settle();
    await wrapper.find("[data-testid=older-notifications]").trigger("click");
    await settle();
    expect(calls.at(-1).url).toBe("/api/notifications?cursor=xyz");
    expect(wrapper.findAll("li[data-kind]").map((li) => li.attributes("data-kind"))).toEqual(["k9", "k4"]);
    expect(wrapper.find("[data-testid=older-notifications]").exists()).toBe(false);
  });

  it("says what will appear when nothing has happened yet", async () => {
    mockFetch({ ...base, "GET /api/executions": json(200, page([])) });
    wrapper = mount(ActivityPage);
    await settle();
    expect(wrapper.find("[data-testid=no-notifications]").text()).toContain("Nothing to report yet");
    expect(wrapper.find("[data-testid=no-executions]").text()).toContain("No turns have run yet");
  });

  it("lists notifications with their level, agent and time", async () => {
    const NOTES = [
      { id: 7, kind: "headroom_alert", level: "warning", title: "max-main 5h window at 91%", body: "", agent_name: "researcher", created_at: "2026-11-30T10:00:00Z" },
    ];
    mockFetch({ ...base, "GET /api/executions": json(200, page([])), "GET /api/notifications": json(200, page(NOTES)) });
    wrapper = mount(ActivityPage);
    await settle();
    const item = wrapper.find("li[data-kind=headroom_alert]");
    expect(item.text()).toContain("warning");
    expect(item.text()).toContain("max-main 5h window at 91%");
    expect(item.text()).toContain("researcher");
  });

  it("marks unread notifications and marks them all read", async () => {
    const unread = { id: 8, kind: "subscription_switched", level: "info", title: "Subscription auto-switched to 'codex'", body: "", agent_name: "researcher", created_at: "2026-11-30T10:00:00Z", read_at: null };
    const read = { id: 7, kind: "headroom_alert", level: "warning", title: "max-main 5h window at 91%", body: "", agent_name: "researcher", created_at: "2026-11-30T09:00:00Z", read_at: "2026-11-30T09:30:00Z" };
    let marked = false;
    const { calls } = mockFetch({
      ...base,
      "GET /api/executions": json(200, page([])),
      "GET /api/notifications": () => json(200, page(marked ? [{ ...unread, read_at: "2026-11-30T11:00:00Z" }, read] : [unread, read])),
      "POST /api/notifications/mark-read": () => {
        marked = true;
        return json(200, { marked: 1 });
      },
    });
    wrapper = mount(ActivityPage);
    await settle();
    expect(wrapper.find("li[data-kind=subscription_switched]").attributes("data-unread")).toBe("true");
    expect(wrapper.find("li[data-kind=subscription_switched] [data-testid=unread]").text()).toBe("Unread");
    expect(wrapper.find("li[data-kind=headroom_alert]").attributes("data-unread")).toBe("false");
    expect(wrapper.find("[data-testid=unread-count]").text()).toBe("1 unread");
    const markAll = wrapper.findAll("button").find((b) => b.text() === "Mark all read");
    await markAll.trigger("click");
    await settle();
    expect(calls.find((c) => c.method === "POST")).toMatchObject({ url: "/api/notifications/mark-read", body: { all: true } });
    expect(wrapper.find("[data-testid=unread]").exists()).toBe(false);
    expect(wrapper.find("[data-testid=unread-count]").exists()).toBe(false);
    expect(wrapper.text()).toContain("Marked 1 notification read.");
    expect(wrapper.findAll("button").find((b) => b.text() === "Mark all read").attributes("disabled")).toBeDefined();
  });

  it("marks one notification read, and asks the server for unread ones only on request", async () => {
    const unread = { id: 8, kind: "pool_exhausted", level: "critical", title: "No credential could serve a turn", body: "", agent_name: "researcher", created_at: "2026-11-30T10:00:00Z", read_at: null };
    const { calls } = mockFetch({
      ...base,
      "GET /api/executions": json(200, page([])),
      "GET /api/notifications": json(200, page([unread])),
      "GET /api/notifications?unread=true": json(200, page([])),
      "POST /api/notifications/mark-read": json(200, { marked: 1 }),
    });
    wrapper = mount(ActivityPage);
    await settle();
    await wrapper.find("button[aria-label='Mark read: No credential could serve a turn']").trigger("click");
    await settle();
    expect(calls.find((c) => c.method === "POST").body).toEqual({ ids: [8] });
    await wrapper.find("input[type=checkbox]").setValue(true);
    await settle();
    expect(calls.at(-1).url).toBe("/api/notifications?unread=true");
    expect(wrapper.find("[data-testid=no-notifications]").text()).toContain("Nothing unread");
  });
});
