import { afterEach, describe, expect, it, vi } from "vitest";
import { mount } from "@vue/test-utils";
import App from "./App.vue";
import { json, mockFetch, settle } from "./test-utils.js";

vi.mock("chart.js", () => ({ Chart: class { static register() {} destroy() {} } }));

let wrapper;
afterEach(() => wrapper?.unmount());

const signedOutRoutes = {
  "GET /api/auth/csrf": { status: 204, body: null },
  "GET /api/auth/me": json(401, { detail: "Not signed in." }),
};

describe("App", () => {
  it("asks a visitor to sign in, then shows the panel for the signed-in user", async () => {
    mockFetch({
      ...signedOutRoutes,
      "POST /api/auth/login": json(200, { username: "operator", is_admin: false }),
      "GET /api/subscriptions": json(200, []),
      "GET /api/agents": json(200, []),
    });
    wrapper = mount(App);
    await settle();
    expect(wrapper.find("h1").text()).toBe("Sign in to Trinity");
    await wrapper.find("#login-username").setValue("operator");
    await wrapper.find("#login-password").setValue("pw");
    await wrapper.find("form").trigger("submit");
    await settle();
    expect(wrapper.find("[data-testid=signed-in-as]").text()).toBe("Signed in as operator");
    expect(wrapper.findAll("nav a").map((a) => a.text())).toEqual(["Subscriptions", "Settings", "Agents", "Schedules", "Activity", "Gateway"]);
    expect(wrapper.find("nav a[aria-current=page]").text()).toBe("Subscriptions");
  });

  it("says the server is unreachable and offers a retry", async () => {
    vi.stubGlobal("fetch", vi.fn().mockRejectedValue(new TypeError("Failed to fetch")));
    wrapper = mount(App);
    await settle();
    expect(wrapper.find("[role=alert]").text()).toContain("can't reach the Trinity server");
    expect(wrapper.find("button").text()).toBe("Try again");
  });

  it("goes back to sign-in when the session ends mid-use", async () => {
    mockFetch({
      "GET /api/auth/csrf": { status: 204, body: null },
      "GET /api/auth/me": json(200, { username: "root", is_admin: true }),
      "GET /api/subscriptions": json(403, { detail: "Authentication credentials were not provided." }),
      "GET /api/agents": json(403, { detail: "Authentication credentials were not provided." }),
    });
    wrapper = mount(App);
    await settle();
    expect(wrapper.find("h1").text()).toBe("Sign in to Trinity");
    expect(wrapper.text()).toContain("Your session ended");
  });

  it("opens an agent's console from its hash, under Agents in the nav", async () => {
    mockFetch({
      "GET /api/auth/csrf": { status: 204, body: null },
      "GET /api/auth/me": json(200, { username: "operator", is_admin: false }),
      "GET /api/agents/bot?owner=operator": json(200, { name: "bot", owner: "operator", process_state: "running" }),
    });
    window.location.hash = "#/agents/bot/console?owner=operator";
    await new Promise((resolve) => window.addEventListener("hashchange", resolve, { once: true }));
    wrapper = mount(App);
    await settle();
    expect(wrapper.find("h1").text()).toBe("Console: bot");
    expect(wrapper.find("nav a[aria-current=page]").text()).toBe("Agents");
    window.location.hash = "";
  });
});
