import { afterEach, describe, expect, it } from "vitest";
import { mount } from "@vue/test-utils";
import OpenAIPlatformKey from "./OpenAIPlatformKey.vue";
import SettingsPage from "../pages/SettingsPage.vue";
import { ADMIN, OPERATOR, json, mockFetch, settle } from "../test-utils.js";

let wrapper;
afterEach(() => wrapper?.unmount());

const URL = "/api/settings/platform-api-key/openai-codex";
const KEY = "sk-proj-" + "o".repeat(40) + "open";
const NONE = { configured: false, fingerprint: "", refusal: null };
const NO_BUDGETS = { key_budget_daily_usd: null, key_budget_monthly_usd: null };

function routes(over = {}) {
  return { [`GET ${URL}`]: json(200, NONE), [`GET ${URL}/budgets`]: json(200, NO_BUDGETS), ...over };
}

describe("OpenAIPlatformKey", () => {
  it("sets the OpenAI key, then forgets it and shows only its fingerprint", async () => {
    const { calls } = mockFetch(routes({ [`PUT ${URL}`]: json(200, { configured: true, fingerprint: "open", refusal: null }) }));
    wrapper = mount(OpenAIPlatformKey);
    await settle();
    expect(wrapper.find("[data-testid=openai-key-status]").text()).toContain("Not configured");
    await wrapper.find("#openai-platform-key").setValue(KEY);
    await wrapper.find("#openai-platform-key").element.form.dispatchEvent(new Event("submit"));
    await settle();
    expect(calls.find((c) => c.method === "PUT").body).toEqual({ key: KEY });
    expect(calls.find((c) => c.method === "PUT").url).toBe(URL);
    expect(wrapper.find("#openai-platform-key").element.value).toBe("");
    expect(wrapper.find("[data-testid=openai-key-status]").text()).toContain("…open");
    expect(wrapper.html()).not.toContain(KEY);
  });

  it("catches an Anthropic key before sending it and says where it belongs", async () => {
    const { calls } = mockFetch(routes());
    wrapper = mount(OpenAIPlatformKey);
    await settle();
    await wrapper.find("#openai-platform-key").setValue("sk-ant-api03-" + "k".repeat(40));
    await wrapper.find("#openai-platform-key").element.form.dispatchEvent(new Event("submit"));
    await settle();
    expect(wrapper.find("#openai-platform-key-error").text()).toContain("Anthropic platform API key");
    expect(calls.filter((c) => c.method === "PUT")).toHaveLength(0);
  });

  it("removes the key after a confirmation", async () => {
    const { calls } = mockFetch(
      routes({ [`GET ${URL}`]: json(200, { configured: true, fingerprint: "open", refusal: null }), [`DELETE ${URL}`]: json(200, NONE) }),
    );
    wrapper = mount(OpenAIPlatformKey);
    await settle();
    const remove = wrapper.findAll("button").find((b) => b.text() === "Remove OpenAI key");
    await remove.trigger("click");
    await settle();
    expect(wrapper.find("[role=alertdialog]").text()).toContain("The Anthropic key stays.");
    await wrapper.findAll("button").find((b) => b.text() === "Remove the OpenAI key").trigger("click");
    await settle();
    expect(calls.some((c) => c.method === "DELETE" && c.url === URL)).toBe(true);
    expect(wrapper.find("[data-testid=openai-key-status]").text()).toContain("Not configured");
  });

  it("says which OpenAI key refused and retries it now", async () => {
    const later = new Date(Date.now() + 2 * 3600 * 1000).toISOString();
    const refused = { configured: true, fingerprint: "open", refusal: { fingerprint: "open", failure_kind: "auth", refused_at: new Date().toISOString(), reopens_at: later } };
    const { calls } = mockFetch(
      routes({
        [`GET ${URL}`]: json(200, refused),
        [`POST ${URL}/retry`]: json(200, { credential: "api_key", name: "OpenAI platform key", fingerprint: "open", cleared: 1, probe: "" }),
      }),
    );
    wrapper = mount(OpenAIPlatformKey);
    await settle();
    expect(wrapper.find("[data-testid=openai-key-refusal]").text()).toContain("Key …open refused");
    await wrapper.find("[data-testid=openai-key-retry]").trigger("click");
    await settle();
    expect(calls.some((c) => c.method === "POST" && c.url === `${URL}/retry`)).toBe(true);
    expect(wrapper.find("[data-testid=openai-key-retry-result]").text()).toContain("1 refusal(s) cleared");
  });

  it("saves its own budgets and refuses a bad amount before sending it", async () => {
    const { calls } = mockFetch(routes({ [`PUT ${URL}/budgets`]: json(200, { key_budget_daily_usd: "7.50", key_budget_monthly_usd: null }) }));
    wrapper = mount(OpenAIPlatformKey);
    await settle();
    await wrapper.find("#openai-budget-daily").setValue("abc");
    await wrapper.find("[data-testid=openai-key-budgets]").trigger("submit");
    await settle();
    expect(wrapper.find("#openai-budget-daily-error").text()).not.toBe("");
    expect(calls.filter((c) => c.method === "PUT")).toHaveLength(0);
    await wrapper.find("#openai-budget-daily").setValue("7.5");
    await wrapper.find("[data-testid=openai-key-budgets]").trigger("submit");
    await settle();
    expect(calls.find((c) => c.method === "PUT")).toMatchObject({ url: `${URL}/budgets`, body: { key_budget_daily_usd: "7.5", key_budget_monthly_usd: null } });
    expect(wrapper.find("#openai-budget-daily").element.value).toBe("7.50");
  });

  it("says so when the server has no OpenAI key yet", async () => {
    mockFetch({});
    wrapper = mount(OpenAIPlatformKey);
    await settle();
    expect(wrapper.find("[data-testid=openai-key-missing]").text()).toBe("Not available on this server yet.");
    expect(wrapper.find("#openai-platform-key").exists()).toBe(false);
  });
});

describe("SettingsPage and the OpenAI key", () => {
  const S = "/api/subscriptions/settings";
  const page = {
    [`GET ${S}/auto-switch`]: json(200, { enabled: true }),
    [`GET ${S}/api-key-fallback`]: json(200, { enabled: true, key_configured: true }),
    [`GET ${S}/headroom-auto-refresh`]: json(200, { enabled: false }),
    [`GET ${S}/headroom-alert-threshold`]: json(200, { threshold: 75 }),
    "GET /api/settings/platform-api-key": json(200, { configured: true, fingerprint: "kkkk", refusal: null }),
  };

  it("shows an admin both keys, each with its own fingerprint", async () => {
    mockFetch({ ...page, ...routes({ [`GET ${URL}`]: json(200, { configured: true, fingerprint: "open", refusal: null }) }) });
    wrapper = mount(SettingsPage, { props: { user: ADMIN } });
    await settle();
    expect(wrapper.find("[data-testid=key-status]").text()).toContain("…kkkk");
    expect(wrapper.find("[data-testid=openai-key-status]").text()).toContain("…open");
  });

  it("never shows a non-admin the OpenAI key or asks for it", async () => {
    const { calls } = mockFetch({ ...page, ...routes() });
    wrapper = mount(SettingsPage, { props: { user: OPERATOR } });
    await settle();
    expect(wrapper.find("[data-testid=openai-key-section]").exists()).toBe(false);
    expect(calls.some((c) => c.url.startsWith(URL))).toBe(false);
  });
});
