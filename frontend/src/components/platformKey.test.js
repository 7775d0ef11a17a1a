import { afterEach, describe, expect, it } from "vitest";
import { mount } from "@vue/test-utils";
import PlatformKey from "./PlatformKey.vue";
import SettingsPage from "../pages/SettingsPage.vue";
import { ADMIN, OPERATOR, json, mockFetch, settle } from "../test-utils.js";

let wrapper;
afterEach(() => wrapper?.unmount());

const ANTHROPIC_URL = "/api/settings/platform-api-key";
const OPENAI_URL = "/api/settings/platform-api-key/openai-codex";
const NONE = { configured: false, fingerprint: "", refusal: null };
const NO_BUDGETS = { key_budget_daily_usd: null, key_budget_monthly_usd: null };

// What each provider's section is called by the people and the browser tests that use it.
const PROVIDERS = [
  {
    provider: "anthropic",
    url: ANTHROPIC_URL,
    key: "sk-ant-api03-" + "k".repeat(40) + "kkkk",
    fingerprint: "kkkk",
    otherKey: "sk-proj-" + "o".repeat(40),
    misplaced: "OpenAI platform key",
    p: "",
    section: "platform-key-section",
    set: "Set the key",
    replace: "Replace the key",
    save: "Save key",
    replaceButton: "Replace key",
    remove: "Remove key",
    confirmRemove: "Remove the key",
    question: "Remove the platform API key?",
    nextTurn: "the next turn",
  },
  {
    provider: "openai-codex",
    url: OPENAI_URL,
    key: "sk-proj-" + "o".repeat(40) + "open",
    fingerprint: "open",
    otherKey: "sk-ant-api03-" + "k".repeat(40),
    misplaced: "Anthropic platform API key",
    p: "openai-",
    section: "openai-key-section",
    set: "Set the OpenAI key",
    replace: "Replace the OpenAI key",
    save: "Save OpenAI key",
    replaceButton: "Replace OpenAI key",
    remove: "Remove OpenAI key",
    confirmRemove: "Remove the OpenAI key",
    question: "The Anthropic key stays.",
    nextTurn: "the next Codex turn",
  },
];

function routes(url, over = {}) {
  return { [`GET ${url}`]: json(200, NONE), [`GET ${OPENAI_URL}/budgets`]: json(200, NO_BUDGETS), ...over };
}

function button(name) {
  return wrapper.findAll("button").find((b) => b.text() === name);
}

describe.each(PROVIDERS)("PlatformKey ($provider)", (k) => {
  const testid = (name) => `[data-testid=${k.p}${name}]`;
  const input = `#${k.p}platform-key`;

  function mountKey(options = {}) {
    wrapper = mount(PlatformKey, { props: { provider: k.provider }, slots: { default: "What the key is for." }, ...options });
  }

  it("sets the key, then forgets it and shows only its fingerprint", async () => {
    const { calls } = mockFetch(routes(k.url, { [`PUT ${k.url}`]: json(200, { configured: true, fingerprint: k.fingerprint, refusal: null }) }));
    mountKey();
    await settle();
    expect(wrapper.find(`[data-testid=${k.section}]`).text()).toContain("What the key is for.");
    expect(wrapper.find(testid("key-status")).text()).toContain("Not configured");
    expect(wrapper.find(`label[for=${k.p}platform-key]`).text()).toBe(k.set);
    expect(button(k.save).attributes("type")).toBe("submit");
    await wrapper.find(input).setValue(k.key);
    await wrapper.find(input).element.form.dispatchEvent(new Event("submit"));
    await settle();
    const put = calls.find((c) => c.method === "PUT");
    expect(put).toMatchObject({ url: k.url, body: { key: k.key } });
    expect(wrapper.find(input).element.value).toBe("");
    expect(wrapper.find(testid("key-status")).text()).toContain(`…${k.fingerprint}`);
    expect(wrapper.find(`label[for=${k.p}platform-key]`).text()).toBe(k.replace);
    expect(button(k.replaceButton).exists()).toBe(true);
    expect(wrapper.text()).toContain("Key saved.");
    expect(wrapper.emitted("change")).toEqual([[{ configured: true, fingerprint: k.fingerprint, refusal: null }]]);
    expect(wrapper.html()).not.toContain(k.key);
  });

  it("catches the other provider's key before sending it and says where it belongs", async () => {
    const { calls } = mockFetch(routes(k.url));
    mountKey();
    await settle();
    await wrapper.find(input).setValue(k.otherKey);
    await wrapper.find(input).element.form.dispatchEvent(new Event("submit"));
    await settle();
    expect(wrapper.find(`#${k.p}platform-key-error`).text()).toContain(k.misplaced);
    expect(wrapper.find(input).attributes("aria-invalid")).toBe("true");
    expect(calls.filter((c) => c.method === "PUT")).toHaveLength(0);
    expect(wrapper.emitted("change")).toBeUndefined();
  });

  it("says the server refused the key and asks for it again", async () => {
    mockFetch(routes(k.url, { [`PUT ${k.url}`]: json(400, { key: ["The provider refused this key."] }) }));
    mountKey();
    await settle();
    await wrapper.find(input).setValue(k.key);
    await wrapper.find(input).element.form.dispatchEvent(new Event("submit"));
    await settle();
    expect(wrapper.find(`#${k.p}platform-key-error`).text()).toBe("The provider refused this key. Paste the key again to retry.");
    expect(wrapper.find(input).element.value).toBe("");
    expect(wrapper.emitted("change")).toBeUndefined();
  });

  it("removes the key after a confirmation that has the focus on Cancel", async () => {
    const { calls } = mockFetch(
      routes(k.url, { [`GET ${k.url}`]: json(200, { configured: true, fingerprint: k.fingerprint, refusal: null }), [`DELETE ${k.url}`]: json(200, NONE) }),
    );
    mountKey({ attachTo: document.body });
    await settle();
    await button(k.remove).trigger("click");
    await settle();
    expect(document.activeElement.textContent).toBe("Cancel");
    const dialog = wrapper.find("[role=alertdialog]");
    expect(dialog.text()).toContain(k.question);
    expect(wrapper.find(`#${dialog.attributes("aria-labelledby")}`).exists()).toBe(true);
    await button(k.confirmRemove).trigger("click");
    await settle();
    expect(calls.some((c) => c.method === "DELETE" && c.url === k.url)).toBe(true);
    expect(wrapper.find(testid("key-status")).text()).toContain("Not configured");
    expect(wrapper.emitted("change")).toEqual([[NONE]]);
  });

  it("says which key refused and when it reopens, and retries it now", async () => {
    const later = new Date(Date.now() + 2 * 3600 * 1000).toISOString();
    const refused = { configured: true, fingerprint: k.fingerprint, refusal: { fingerprint: k.fingerprint, failure_kind: "auth", refused_at: new Date().toISOString(), reopens_at: later } };
    const { calls } = mockFetch(
      routes(k.url, {
        [`GET ${k.url}`]: json(200, refused),
        [`POST ${k.url}/retry`]: json(200, { credential: "api_key", name: "platform key", fingerprint: k.fingerprint, cleared: 1, probe: "" }),
      }),
    );
    mountKey();
    await settle();
    expect(wrapper.find(testid("key-refusal")).text()).toContain(`Key …${k.fingerprint} refused`);
    expect(wrapper.find(testid("key-refusal")).text()).toMatch(/rung reopens in (1 h 59 min|2 h)/);
    await wrapper.find(testid("key-retry")).trigger("click");
    await settle();
    expect(calls.some((c) => c.method === "POST" && c.url === `${k.url}/retry`)).toBe(true);
    expect(wrapper.find(testid("key-retry-result")).text()).toBe(
      `Retried key …${k.fingerprint}: 1 refusal(s) cleared; ${k.nextTurn} may use it.`,
    );
  });

  it("keeps the key form shut until the section holds the server's state", async () => {
    // A save made while the first read was in flight would be overwritten by its older answer.
    let release;
    const pending = new Promise((resolve) => (release = resolve));
    mockFetch(routes(k.url, { [`GET ${k.url}`]: () => pending.then(() => json(200, NONE)) }));
    mountKey();
    await settle();
    expect(wrapper.find(input).element.disabled).toBe(true);
    release();
    await settle();
    expect(wrapper.find(input).element.disabled).toBe(false);
  });

  it("says so when the server has no such key yet", async () => {
    mockFetch({});
    mountKey();
    await settle();
    expect(wrapper.find(testid("key-missing")).text()).toBe("Not available on this server yet.");
    expect(wrapper.find(input).exists()).toBe(false);
  });
});

describe("PlatformKey's budgets", () => {
  it("saves the OpenAI key's own budgets and refuses a bad amount before sending it", async () => {
    const { calls } = mockFetch(routes(OPENAI_URL, { [`PUT ${OPENAI_URL}/budgets`]: json(200, { key_budget_daily_usd: "7.50", key_budget_monthly_usd: null }) }));
    wrapper = mount(PlatformKey, { props: { provider: "openai-codex" } });
    await settle();
    expect(wrapper.find("label[for=openai-budget-daily]").text()).toBe("OpenAI key budget per day, all agents (USD)");
    expect(wrapper.find("#openai-budget-daily").attributes("aria-describedby")).toBe("openai-budget-hint openai-budget-daily-error");
    await wrapper.find("#openai-budget-daily").setValue("abc");
    await wrapper.find("[data-testid=openai-key-budgets]").trigger("submit");
    await settle();
    expect(wrapper.find("#openai-budget-daily-error").text()).not.toBe("");
    expect(calls.filter((c) => c.method === "PUT")).toHaveLength(0);
    await wrapper.find("#openai-budget-daily").setValue("7.5");
    expect(button("Save OpenAI budgets").attributes("type")).toBe("submit");
    await wrapper.find("[data-testid=openai-key-budgets]").trigger("submit");
    await settle();
    expect(calls.find((c) => c.method === "PUT")).toMatchObject({ url: `${OPENAI_URL}/budgets`, body: { key_budget_daily_usd: "7.5", key_budget_monthly_usd: null } });
    expect(wrapper.find("#openai-budget-daily").element.value).toBe("7.50");
  });

  it("has no budget form for the Anthropic key, whose fleet budgets are routing settings", async () => {
    const { calls } = mockFetch(routes(ANTHROPIC_URL));
    wrapper = mount(PlatformKey, { props: { provider: "anthropic" } });
    await settle();
    expect(wrapper.find("[data-testid=key-budgets]").exists()).toBe(false);
    expect(wrapper.find("input[inputmode=decimal]").exists()).toBe(false);
    expect(calls.map((c) => c.url)).toEqual([ANTHROPIC_URL]);
  });
});

describe("SettingsPage and its two platform keys", () => {
  const S = "/api/subscriptions/settings";
  const page = {
    [`GET ${S}/auto-switch`]: json(200, { enabled: true }),
    [`GET ${S}/api-key-fallback`]: json(200, { enabled: true, key_configured: true }),
    [`GET ${S}/headroom-auto-refresh`]: json(200, { enabled: false }),
    [`GET ${S}/headroom-alert-threshold`]: json(200, { threshold: 75 }),
    [`GET ${ANTHROPIC_URL}`]: json(200, { configured: true, fingerprint: "kkkk", refusal: null }),
  };

  it("shows an admin both keys, each with its own fingerprint, ids and test ids", async () => {
    mockFetch({ ...page, ...routes(OPENAI_URL, { [`GET ${OPENAI_URL}`]: json(200, { configured: true, fingerprint: "open", refusal: null }) }) });
    wrapper = mount(SettingsPage, { props: { user: ADMIN } });
    await settle();
    expect(wrapper.find("[data-testid=platform-key-section] h2").text()).toBe("Platform API key");
    expect(wrapper.find("[data-testid=openai-key-section] h2").text()).toBe("OpenAI platform key");
    expect(wrapper.find("[data-testid=key-status]").text()).toContain("…kkkk");
    expect(wrapper.find("[data-testid=openai-key-status]").text()).toContain("…open");
    const ids = wrapper.findAll("[id]").map((e) => e.attributes("id"));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("re-reads the fallback when the Anthropic key is set, so it is no longer called inert", async () => {
    let keyConfigured = false;
    const { calls } = mockFetch({
      ...page,
      ...routes(OPENAI_URL),
      [`GET ${S}/api-key-fallback`]: () => json(200, { enabled: true, key_configured: keyConfigured }),
      [`GET ${ANTHROPIC_URL}`]: json(200, NONE),
      [`PUT ${ANTHROPIC_URL}`]: () => {
        keyConfigured = true;
        return json(200, { configured: true, fingerprint: "kkkk", refusal: null });
      },
      [`PUT ${OPENAI_URL}`]: json(200, { configured: true, fingerprint: "open", refusal: null }),
    });
    wrapper = mount(SettingsPage, { props: { user: ADMIN } });
    await settle();
    expect(wrapper.find("[data-testid=fallback-inert]").exists()).toBe(true);
    // The OpenAI key is no Claude agent's fallback: setting it leaves the fallback alone.
    await wrapper.find("#openai-platform-key").setValue(PROVIDERS[1].key);
    await wrapper.find("#openai-platform-key").element.form.dispatchEvent(new Event("submit"));
    await settle();
    expect(calls.filter((c) => c.url === `${S}/api-key-fallback`)).toHaveLength(1);
    await wrapper.find("#platform-key").setValue(PROVIDERS[0].key);
    await wrapper.find("#platform-key").element.form.dispatchEvent(new Event("submit"));
    await settle();
    expect(calls.filter((c) => c.url === `${S}/api-key-fallback`)).toHaveLength(2);
    expect(wrapper.find("[data-testid=fallback-inert]").exists()).toBe(false);
  });

  it("never shows a non-admin either key or asks for one", async () => {
    const { calls } = mockFetch({ ...page, ...routes(OPENAI_URL) });
    wrapper = mount(SettingsPage, { props: { user: OPERATOR } });
    await settle();
    expect(wrapper.find("[data-testid=platform-key-section]").exists()).toBe(false);
    expect(wrapper.find("[data-testid=openai-key-section]").exists()).toBe(false);
    expect(calls.some((c) => c.url.startsWith(ANTHROPIC_URL))).toBe(false);
  });
});
