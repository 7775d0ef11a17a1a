import { afterEach, describe, expect, it, vi } from "vitest";
import { mount } from "@vue/test-utils";
import GatewayPage from "./GatewayPage.vue";
import { ADMIN, json, mockFetch, OPERATOR, settle } from "../test-utils.js";

let wrapper;
afterEach(() => {
  wrapper?.unmount();
  vi.unstubAllGlobals();
});

const SECRET = "trinity-gw-AbC123restOfTheKeyThatIsShownOnlyOnce00000000";
const KEY = {
  id: 7, name: "laptop", owner: "operator", prefix: "AbC123", status: "active", created_by: "operator",
  created_at: "2026-06-01T12:00:00Z", updated_at: "2026-06-01T12:00:00Z", expires_at: null, revoked_at: null,
  providers: [], model_families: [], requests_per_minute: null, max_streams: null, daily_tokens: 1000,
  monthly_tokens: null, daily_usd: null, monthly_usd: null,
};
const CATALOG = {
  key_prefix: "trinity-gw-",
  providers: [
    { id: "anthropic", families: ["opus", "sonnet", "haiku"], models: [] },
    { id: "openai-codex", families: ["codex", "gpt-5"], models: [] },
  ],
};
const FIGURES = {
  requests: 4, refused: 1, disconnected: 1, input_tokens: 310, output_tokens: 55, cache_read_tokens: 1000,
  cache_write_tokens: 50, list_usd: "0.530000", billed_usd: "0.500000",
};
const USAGE = {
  since: "2026-05-02T12:00:00Z", until: "2026-06-01T12:00:00Z",
  keys: [{
    ...FIGURES,
    key: { id: 7, name: "laptop", prefix: "AbC123", owner: "operator" },
    models: [
      { ...FIGURES, model: "claude-sonnet-4-5", requests: 3, input_tokens: 300, output_tokens: 50, list_usd: "0.030000", billed_usd: "0.000000" },
      { ...FIGURES, model: "claude-opus-4-5", requests: 1, input_tokens: 10, output_tokens: 5, cache_read_tokens: 0, cache_write_tokens: 0 },
    ],
    served_by: [
      { ...FIGURES, kind: "subscription", name: "max-a", requests: 2 },
      { ...FIGURES, kind: "", name: "", requests: 1 },
      { ...FIGURES, kind: "api_key", name: "platform", requests: 1 },
    ],
  }],
  owners: [],
  totals: FIGURES,
};

function routes(extra = {}) {
  return {
    "GET /api/gateway/keys": json(200, [KEY]),
    "GET /api/gateway/catalog": json(200, CATALOG),
    "GET /api/gateway/usage": json(200, USAGE),
    "GET /api/gateway/streams": json(200, []),
    ...extra,
  };
}

async function mountPage(user = OPERATOR) {
  wrapper = mount(GatewayPage, { props: { user }, attachTo: document.body });
  await settle();
}

const button = (text) => wrapper.findAll("button").find((b) => b.text() === text);

describe("GatewayPage", () => {
  it("lists the caller's keys by prefix, status and limits, never more of the key", async () => {
    mockFetch(routes());
    await mountPage();
    const row = wrapper.find("tr[data-key=laptop]");
    expect(row.find("[data-testid=key-prefix]").text()).toBe("trinity-gw-AbC123…");
    expect(row.find("[data-testid=key-status]").text()).toBe("Active");
    expect(row.find("[data-testid=key-limits]").text()).toBe("1,000 tokens/day");
    expect(wrapper.findAll("th").map((th) => th.text())).not.toContain("Owner");
  });

  it("creates a key, shows it once with a copy button and a warning, and forgets it", async () => {
    const writeText = vi.fn().mockResolvedValue(undefined);
    vi.stubGlobal("navigator", { clipboard: { writeText } });
    const { calls } = mockFetch(
      routes({ "POST /api/gateway/keys": json(201, { ...KEY, id: 8, name: "ci", key: SECRET }) })
    );
    await mountPage();
    await button("Create key").trigger("click");
    await wrapper.find("#new-key-name").setValue("ci");
    await wrapper.find("#new-key-daily_tokens").setValue("500");
    await wrapper.find("input[type=checkbox][value=anthropic]").setValue(true);
    await wrapper.find("input[type=checkbox][value=sonnet]").setValue(true);
    await wrapper.find("form").trigger("submit");
    await settle();
    expect(calls.find((c) => c.method === "POST").body).toEqual({
      name: "ci", providers: ["anthropic"], model_families: ["sonnet"], daily_tokens: 500,
    });
    const notice = wrapper.find("[data-testid=created-key]");
    expect(notice.text()).toContain("only time it is shown");
    expect(notice.find("[data-testid=new-key]").element.value).toBe(SECRET);
    expect(wrapper.find("tr[data-key=ci]").exists()).toBe(true);
    expect(wrapper.find("tr[data-key=ci]").text()).not.toContain(SECRET);

    await button("Copy").trigger("click");
    await settle();
    expect(writeText).toHaveBeenCalledWith(SECRET);
    expect(notice.text()).toContain("Copied");

    await button("Done, I've copied it").trigger("click");
    expect(wrapper.find("[data-testid=created-key]").exists()).toBe(false);
    expect(wrapper.html()).not.toContain(SECRET);
  });

  it("lets an admin create a key for someone else and shows owners", async () => {
    const { calls } = mockFetch(
      routes({ "POST /api/gateway/keys": json(201, { ...KEY, id: 9, name: "ci", owner: "alice", key: SECRET }) })
    );
    await mountPage(ADMIN);
    expect(wrapper.find("tr[data-key=laptop] td[data-label=Owner]").text()).toBe("operator");
    await button("Create key").trigger("click");
    await wrapper.find("#new-key-name").setValue("ci");
    await wrapper.find("#new-key-owner").setValue("alice");
    await wrapper.find("form").trigger("submit");
    await settle();
    expect(calls.find((c) => c.method === "POST").body).toEqual({ name: "ci", owner: "alice" });
    expect(wrapper.find("[data-testid=created-key]").text()).toContain("(for alice)");
  });

  it("shows the server's field errors beside the fields", async () => {
    mockFetch(routes({ "POST /api/gateway/keys": json(409, { name: ["A gateway key named 'laptop' exists already."] }) }));
    await mountPage();
    await button("Create key").trigger("click");
    await wrapper.find("#new-key-name").setValue("laptop");
    await wrapper.find("form").trigger("submit");
    await settle();
    expect(wrapper.find("#new-key-name-error").text()).toBe("A gateway key named 'laptop' exists already.");
    expect(wrapper.find("[data-testid=created-key]").exists()).toBe(false);
  });

  it("changes only what changed and says why the server refused a raise", async () => {
    const detail = "Only an admin may raise, widen or clear daily_tokens on a key; you may only tighten them.";
    const { calls } = mockFetch(routes({ "PATCH /api/gateway/keys/7": json(403, { detail }) }));
    await mountPage();
    await button("Change").trigger("click");
    await wrapper.find("#key-7-daily_tokens").setValue("2000");
    await wrapper.find("tr.detail form").trigger("submit");
    await settle();
    expect(calls.find((c) => c.method === "PATCH").body).toEqual({ daily_tokens: 2000 });
    expect(wrapper.find("tr.detail [role=alert]").text()).toBe(`Not saved: ${detail}`);
  });

  it("revokes only after confirming, and the row then says revoked", async () => {
    const { calls } = mockFetch(
      routes({ "DELETE /api/gateway/keys/7": json(200, { ...KEY, status: "revoked", revoked_at: "2026-06-01T13:00:00Z" }) })
    );
    await mountPage();
    await button("Revoke").trigger("click");
    const dialog = wrapper.find("[role=alertdialog]");
    expect(dialog.text()).toContain("Revoke laptop?");
    await button("Cancel").trigger("click");
    expect(calls.some((c) => c.method === "DELETE")).toBe(false);
    await button("Revoke").trigger("click");
    await button("Revoke laptop").trigger("click");
    await settle();
    expect(calls.at(-1)).toMatchObject({ method: "DELETE", url: "/api/gateway/keys/7" });
    expect(wrapper.find("tr[data-key=laptop] [data-testid=key-status]").text()).toBe("Revoked");
    expect(button("Revoke")).toBeUndefined();
  });

  it("shows usage per key: requests, tokens by model, served by, list price beside billed", async () => {
    const { calls } = mockFetch(routes());
    await mountPage();
    const row = wrapper.find("tr[data-usage-key=laptop]");
    expect(row.find("[data-testid=usage-requests]").text()).toBe("4 1 refused · 1 cut off");
    expect(row.text()).toContain("claude-sonnet-4-5: 300 in · 50 out · 1,000 cache read · 50 cache write");
    expect(row.text()).toContain("claude-opus-4-5: 10 in · 5 out");
    expect(row.text()).toContain("max-a (plan): 2");
    expect(row.text()).toContain("not served: 1");
    expect(row.text()).toContain("platform (platform key): 1");
    expect(row.find("[data-testid=usage-list]").text()).toBe("$0.53");
    expect(row.find("[data-testid=usage-billed]").text()).toBe("$0.50");
    const usageCall = calls.find((c) => c.url.startsWith("/api/gateway/usage"));
    const params = new URLSearchParams(usageCall.url.split("?")[1]);
    expect(Date.parse(params.get("until")) - Date.parse(params.get("since"))).toBe(30 * 86_400_000);
  });

  it("lists open requests, refreshes them, and says when they can't be read", async () => {
    let answer = json(200, []);
    mockFetch(routes({ "GET /api/gateway/streams": () => answer }));
    await mountPage();
    expect(wrapper.find("[data-testid=no-streams]").exists()).toBe(true);
    answer = json(200, [{
      request_id: "r-1", key_id: 7, key_name: "laptop", key_prefix: "AbC123", owner: "operator",
      provider: "anthropic", model: "claude-sonnet-4-5", started_at: new Date().toISOString(), served_by: "max-a",
    }]);
    await button("Refresh").trigger("click");
    await settle();
    expect(wrapper.find("tr[data-stream=r-1]").text()).toContain("max-a");
    answer = json(503, { detail: "The open streams can't be read now: the gateway did not answer.", code: "streams_unavailable" });
    await button("Refresh").trigger("click");
    await settle();
    expect(wrapper.find("[data-testid=streams-error]").text()).toContain("the gateway did not answer");
  });

  it("says when there are no keys yet", async () => {
    mockFetch(routes({ "GET /api/gateway/keys": json(200, []) }));
    await mountPage();
    expect(wrapper.find("[data-testid=no-keys]").text()).toContain("You have no gateway keys.");
  });
});
