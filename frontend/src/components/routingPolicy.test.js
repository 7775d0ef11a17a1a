import { afterEach, describe, expect, it } from "vitest";
import { mount } from "@vue/test-utils";
import AgentRouting from "./AgentRouting.vue";
import RoutingSettings from "./RoutingSettings.vue";
import AgentsPage from "../pages/AgentsPage.vue";
import SettingsPage from "../pages/SettingsPage.vue";
import { hoursToSeconds, maxWaitProblem, secondsToHours, usdProblem, usdValue } from "../routingPolicy.js";
import { ADMIN, OPERATOR, json, mockFetch, settle } from "../test-utils.js";

let wrapper;
afterEach(() => wrapper?.unmount());

const AGENT = {
  name: "bot",
  owner: "operator",
  runtime: "claude-code",
  model: "",
  subscription: { id: 1, name: "max-main" },
  use_platform_api_key: true,
  routing_policy: "thrifty",
  wait_policy: "wait",
  max_wait_seconds: 6 * 3600,
  key_budget_daily_usd: null,
  key_budget_monthly_usd: "40.00",
  process_state: "running",
  last_switch: null,
};
const ROUTING_URL = "/api/subscriptions/settings/routing";
const ROUTING = {
  default_routing_policy: "thrifty",
  routing_strategy: "banded",
  key_budget_daily_usd: null,
  key_budget_monthly_usd: null,
};

describe("routingPolicy.js", () => {
  it.each([
    ["0", ""],
    ["6", ""],
    ["0.25", ""],
    ["168", ""],
    ["168.01", "At most 168 hours (7 days)."],
    ["-1", "Enter a number of hours from 0 to 168."],
    ["", "Enter a number of hours from 0 to 168."],
    ["six", "Enter a number of hours from 0 to 168."],
  ])("checks a maximum wait of %j hours", (raw, problem) => {
    expect(maxWaitProblem(raw)).toBe(problem);
  });

  it.each([
    ["", "", null],
    ["  ", "", null],
    ["0", "", "0"],
    ["12.5", "", "12.5"],
    ["12.50", "", "12.50"],
    ["1.001", "Enter dollars and cents, e.g. 25 or 12.50 (empty: no cap).", "1.001"],
    ["-3", "Enter dollars and cents, e.g. 25 or 12.50 (empty: no cap).", "-3"],
    ["1e5", "Enter dollars and cents, e.g. 25 or 12.50 (empty: no cap).", "1e5"],
  ])("checks a budget of %j and sends it as a string or null", (raw, problem, sent) => {
    expect(usdProblem(raw)).toBe(problem);
    expect(usdValue(raw)).toBe(sent);
  });

  it("converts hours and seconds both ways", () => {
    expect(hoursToSeconds("168")).toBe(604800);
    expect(hoursToSeconds("0.25")).toBe(900);
    expect(secondsToHours(21600)).toBe("6");
    expect(secondsToHours(900)).toBe("0.25");
  });
});

describe("AgentRouting", () => {
  it("summarises the agent's routing and saves every field in the API's units", async () => {
    const saved = { ...AGENT, routing_policy: "subscription-only", wait_policy: "fail", max_wait_seconds: 5400, key_budget_daily_usd: "2.50", key_budget_monthly_usd: null };
    const { calls } = mockFetch({ "PATCH /api/agents/bot": json(200, saved) });
    wrapper = mount(AgentRouting, { props: { agent: AGENT } });
    expect(wrapper.find("[data-testid=policy-label]").text()).toBe("Thrifty: plans first, the API key last");
    expect(wrapper.find("[data-testid=wait-label]").text()).toBe("Autonomous turns wait up to 6 h");
    expect(wrapper.find("[data-testid=budget-label]").text()).toBe("API key: no cap/day, $40.00/month");

    await wrapper.find("[data-testid=edit-routing]").trigger("click");
    await wrapper.find("#routing-bot-policy").setValue("subscription-only");
    // The help text follows the choice.
    expect(wrapper.find("[data-testid=policy-help]").text()).toContain("never on the platform API key");
    await wrapper.find("#routing-bot-wait").setValue("fail");
    await wrapper.find("#routing-bot-max-wait").setValue("1.5");
    await wrapper.find("#routing-bot-daily").setValue("2.50");
    await wrapper.find("#routing-bot-monthly").setValue("");
    await wrapper.find("[data-testid=routing-form]").trigger("submit");
    await settle();

    const patch = calls.find((c) => c.method === "PATCH");
    expect(patch.body).toEqual({
      routing_policy: "subscription-only",
      wait_policy: "fail",
      max_wait_seconds: 5400,
      key_budget_daily_usd: "2.50",
      key_budget_monthly_usd: null,
    });
    expect(wrapper.emitted("update")[0][0]).toEqual(saved);
    expect(wrapper.find("[data-testid=routing-form]").exists()).toBe(false);
  });

  it("shows the budget that applies, the admin's cap and why the key is closed", () => {
    const capped = {
      ...AGENT,
      key_budget_daily_usd: "50.00",
      admin_key_budget_daily_usd: "2.00",
      admin_key_budget_monthly_usd: null,
      effective_key_budget_daily_usd: "2.00",
      effective_key_budget_monthly_usd: "40.00",
      platform_key: { allowed: false, reason: "fallback_off" },
    };
    wrapper = mount(AgentRouting, { props: { agent: capped } });
    expect(wrapper.find("[data-testid=budget-label]").text()).toBe("API key: $2.00/day, $40.00/month");
    expect(wrapper.find("[data-testid=admin-cap-label]").text()).toBe(
      "Admin's cap: $2.00/day, no cap/month (yours can only be lower)",
    );
    expect(wrapper.find("[data-testid=key-off-label]").text()).toContain("admin turned the API-key fallback off");
  });

  it("sends nothing while a value is out of range, and says which", async () => {
    const { calls } = mockFetch({});
    wrapper = mount(AgentRouting, { props: { agent: AGENT } });
    await wrapper.find("[data-testid=edit-routing]").trigger("click");
    await wrapper.find("#routing-bot-max-wait").setValue("200");
    await wrapper.find("#routing-bot-daily").setValue("1.001");
    await wrapper.find("[data-testid=routing-form]").trigger("submit");
    await settle();
    expect(calls).toEqual([]);
    expect(wrapper.find("#routing-bot-max-wait-error").text()).toBe("At most 168 hours (7 days).");
    expect(wrapper.find("#routing-bot-daily").attributes("aria-invalid")).toBe("true");
  });

  it("shows the server's verdict on a field it refused", async () => {
    mockFetch({ "PATCH /api/agents/bot": json(400, { key_budget_monthly_usd: ["Ensure that there are no more than 12 digits in total."] }) });
    wrapper = mount(AgentRouting, { props: { agent: AGENT } });
    await wrapper.find("[data-testid=edit-routing]").trigger("click");
    await wrapper.find("[data-testid=routing-form]").trigger("submit");
    await settle();
    expect(wrapper.find("#routing-bot-monthly-error").text()).toBe("Ensure that there are no more than 12 digits in total.");
    expect(wrapper.find("[data-testid=routing-form]").exists()).toBe(true);
  });
});

describe("RoutingSettings", () => {
  it("lets an admin change the fleet's routing and sends budgets as strings or null", async () => {
    const after = { ...ROUTING, routing_strategy: "balanced", key_budget_daily_usd: "25.00" };
    const { calls } = mockFetch({ [`GET ${ROUTING_URL}`]: json(200, ROUTING), [`PUT ${ROUTING_URL}`]: json(200, after) });
    wrapper = mount(RoutingSettings, { props: { canEdit: true } });
    await settle();
    expect(wrapper.find("[data-testid=default-policy-help]").text()).toContain("Existing agents keep theirs.");
    await wrapper.find("#routing-strategy").setValue("balanced");
    await wrapper.find("#fleet-budget-daily").setValue("25");
    await wrapper.find("[data-testid=routing-settings-form]").trigger("submit");
    await settle();
    const put = calls.find((c) => c.method === "PUT");
    expect(put.body).toEqual({
      default_routing_policy: "thrifty",
      routing_strategy: "balanced",
      key_budget_daily_usd: "25",
      key_budget_monthly_usd: null,
    });
    expect(wrapper.find("#fleet-budget-daily").element.value).toBe("25.00");
    expect(wrapper.text()).toContain("Saved.");
  });

  it("shows everyone else the settings in words, with nothing to edit", async () => {
    mockFetch({ [`GET ${ROUTING_URL}`]: json(200, { ...ROUTING, key_budget_monthly_usd: "500.00" }) });
    wrapper = mount(RoutingSettings, { props: { canEdit: false } });
    await settle();
    expect(wrapper.find("form").exists()).toBe(false);
    expect(wrapper.find("[data-testid=routing-readonly]").text()).toContain("no cap per day, $500.00 per month");
  });
});

describe("the pages mount them", () => {
  it("shows each agent's routing on the Agents page and keeps what a save returned", async () => {
    const saved = { ...AGENT, wait_policy: "fail" };
    mockFetch({
      "GET /api/agents": json(200, [AGENT]),
      "GET /api/subscriptions/settings/api-key-fallback": json(200, { enabled: true, key_configured: true }),
      "GET /api/subscriptions": json(200, []),
      "PATCH /api/agents/bot": json(200, saved),
    });
    wrapper = mount(AgentsPage, { props: { user: OPERATOR }, global: { stubs: { RoutingExplain: true } } });
    await settle();
    const cell = wrapper.find("[data-testid=agent-routing-bot]");
    expect(cell.exists()).toBe(true);
    await cell.find("[data-testid=edit-routing]").trigger("click");
    await wrapper.find("[data-testid=routing-form]").trigger("submit");
    await settle();
    expect(wrapper.find("[data-testid=wait-label]").text()).toBe("Autonomous turns fail when refused");
  });

  it("puts the routing section on the Settings page, editable only by an admin", async () => {
    const S = "/api/subscriptions/settings";
    const routes = {
      [`GET ${S}/auto-switch`]: json(200, { enabled: true }),
      [`GET ${S}/api-key-fallback`]: json(200, { enabled: true, key_configured: true }),
      [`GET ${S}/headroom-auto-refresh`]: json(200, { enabled: true }),
      [`GET ${S}/headroom-alert-threshold`]: json(200, { threshold: 75 }),
      "GET /api/settings/platform-api-key": json(200, { configured: true, fingerprint: "abcd" }),
      [`GET ${ROUTING_URL}`]: json(200, ROUTING),
    };
    mockFetch(routes);
    wrapper = mount(SettingsPage, { props: { user: ADMIN }, global: { stubs: { NotificationChannels: true, KeyBudgets: true } } });
    await settle();
    expect(wrapper.find("[data-testid=routing-settings-form]").exists()).toBe(true);
    wrapper.unmount();
    mockFetch(routes);
    wrapper = mount(SettingsPage, { props: { user: OPERATOR }, global: { stubs: { KeyBudgets: true } } });
    await settle();
    expect(wrapper.find("[data-testid=routing-settings]").exists()).toBe(true);
    expect(wrapper.find("[data-testid=routing-settings-form]").exists()).toBe(false);
  });
});
