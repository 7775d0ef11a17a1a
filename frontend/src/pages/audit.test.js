import { afterEach, describe, expect, it, vi } from "vitest";
import { mount } from "@vue/test-utils";
import App from "../App.vue";
import AuditPage from "./AuditPage.vue";
import { actorLabel, changeRows, exportUrl, objectLabel } from "../audit.js";
import { ADMIN, json, mockFetch, OPERATOR, page, settle } from "../test-utils.js";

vi.mock("chart.js", () => ({ Chart: class { static register() {} destroy() {} } }));

let wrapper;
afterEach(() => {
  wrapper?.unmount();
  vi.unstubAllGlobals();
});

const ENTRY = {
  id: 2, created_at: "2026-06-01T12:00:00Z", actor_kind: "api_token", actor_user: 1, actor_username: "root",
  actor_token: "abcd1234…", source: "api", address: "192.0.2.1", action: "subscription.update", method: "PATCH",
  path: "/api/subscriptions/3", route: "subscription-detail", status_code: 200, object_type: "subscription",
  object_id: "3", object_label: "plan-a", changes: { paused: [false, true], token: ["…0001", "…0002"] }, request_id: "r1",
};
const SIGN_IN = {
  ...ENTRY, id: 1, actor_kind: "anonymous", actor_user: null, actor_username: "mallory", actor_token: "", source: "panel",
  action: "sign_in.failed", object_type: "user", object_id: "", object_label: "mallory", changes: {},
};

async function mountPage(user = ADMIN) {
  wrapper = mount(AuditPage, { props: { user }, attachTo: document.body });
  await settle();
  return wrapper;
}

describe("audit entries as the panel reads them", () => {
  it("names the actor, the way they came and the object", () => {
    expect(actorLabel(ENTRY)).toBe("root via API token abcd1234…");
    expect(actorLabel(SIGN_IN)).toBe("mallory (not signed in)");
    expect(actorLabel({ actor_kind: "system" })).toBe("System");
    expect(objectLabel(ENTRY)).toBe("subscription plan-a");
  });

  it("lists each changed field before and after", () => {
    expect(changeRows(ENTRY.changes)).toEqual([
      { field: "paused", before: "false", after: "true" },
      { field: "token", before: "…0001", after: "…0002" },
    ]);
    expect(changeRows({ name: [null, "x"] })).toEqual([{ field: "name", before: "—", after: "x" }]);
  });

  it("exports with the same filters", () => {
    expect(exportUrl({ actor: "root", action: "" })).toBe("/api/audit/export?actor=root");
    expect(exportUrl({})).toBe("/api/audit/export");
  });
});

describe("AuditPage", () => {
  it("shows the newest entries and their changes on demand", async () => {
    mockFetch({ "GET /api/audit": json(200, page([ENTRY, SIGN_IN])) });
    await mountPage();
    const rows = wrapper.findAll("[data-testid=audit-entry]");
    expect(rows).toHaveLength(2);
    expect(rows[0].text()).toContain("subscription.update");
    expect(rows[1].text()).toContain("mallory (not signed in)");
    await rows[0].find("button").trigger("click");
    expect(wrapper.find("[data-testid=audit-changes]").text()).toContain("…0002");
  });

  it("filters on the server and pages older entries by cursor", async () => {
    const { calls } = mockFetch({
      "GET /api/audit": json(200, page([ENTRY], "http://x/api/audit?cursor=abc")),
      "GET /api/audit?cursor=abc": json(200, page([SIGN_IN])),
      "GET /api/audit?actor=root": json(200, page([ENTRY])),
    });
    await mountPage();
    await wrapper.find("[data-testid=older-audit]").trigger("click");
    await settle();
    expect(wrapper.findAll("[data-testid=audit-entry]")).toHaveLength(2);
    await wrapper.find("#audit-actor").setValue("root");
    await wrapper.find("#audit-actor").trigger("change");
    await settle();
    expect(calls.map((c) => c.url)).toContain("/api/audit?actor=root");
    expect(wrapper.find("[data-testid=audit-export]").attributes("href")).toBe("/api/audit/export?actor=root");
  });

  it("asks nothing of the server for an operator", async () => {
    const { calls } = mockFetch({});
    await mountPage(OPERATOR);
    expect(wrapper.find("[data-testid=audit-admins-only]").exists()).toBe(true);
    expect(calls).toHaveLength(0);
  });
});

describe("the nav", () => {
  it("links the Audit page for an admin only", async () => {
    const session = (me) => ({
      "GET /api/auth/csrf": { status: 204, body: null },
      "GET /api/auth/me": json(200, me),
      "GET /api/subscriptions": json(200, []),
      "GET /api/agents": json(200, []),
    });
    mockFetch(session(ADMIN));
    wrapper = mount(App);
    await settle();
    expect(wrapper.findAll("nav a").map((a) => a.text())).toContain("Audit");
    wrapper.unmount();
    mockFetch(session(OPERATOR));
    wrapper = mount(App);
    await settle();
    expect(wrapper.findAll("nav a").map((a) => a.text())).not.toContain("Audit");
  });
});
