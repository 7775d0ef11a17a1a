import { afterEach, describe, expect, it } from "vitest";
import { mount } from "@vue/test-utils";
import LoginForm from "./LoginForm.vue";
import SubscriptionForm from "./SubscriptionForm.vue";
import PressureCell from "./PressureCell.vue";
import ExecutionTrail from "./ExecutionTrail.vue";
import LastSwitch from "./LastSwitch.vue";
import { json, mockFetch, settle } from "../test-utils.js";
import { readUsage } from "../headroom.js";

const PLAN = "sk-ant-oat01-" + "p".repeat(40);
const API_KEY = "sk-ant-api03-" + "k".repeat(40);
const NOW = Date.parse("2026-11-30T12:00:00Z");
const SSO_ON = { sso: { enabled: true, label: "Acme SSO", start_url: "/oidc/authenticate/" }, local_passwords: true };

let wrapper;
afterEach(() => wrapper?.unmount());

describe("LoginForm", () => {
  const posts = (calls) => calls.filter((c) => c.method === "POST");

  it("signs in and forgets the password", async () => {
    const { calls } = mockFetch({ "POST /api/auth/login": json(200, { username: "root", is_admin: true }) });
    wrapper = mount(LoginForm);
    await settle();
    await wrapper.find("#login-username").setValue("root");
    await wrapper.find("#login-password").setValue("pw");
    await wrapper.find("form").trigger("submit");
    await settle();
    expect(posts(calls)[0].body).toEqual({ username: "root", password: "pw" });
    expect(wrapper.emitted("signed-in")[0][0]).toEqual({ username: "root", is_admin: true });
    expect(wrapper.find("#login-password").element.value).toBe("");
  });

  it("shows the server's refusal as an alert", async () => {
    mockFetch({ "POST /api/auth/login": json(400, { detail: "Those credentials were not accepted." }) });
    wrapper = mount(LoginForm);
    await settle();
    await wrapper.find("#login-username").setValue("root");
    await wrapper.find("#login-password").setValue("nope");
    await wrapper.find("form").trigger("submit");
    await settle();
    expect(wrapper.find("[role=alert]").text()).toBe("Those credentials were not accepted.");
    expect(wrapper.emitted("signed-in")).toBeUndefined();
  });

  it("asks for both fields before sending anything", async () => {
    const { calls } = mockFetch({});
    wrapper = mount(LoginForm);
    await settle();
    await wrapper.find("form").trigger("submit");
    expect(wrapper.find("[role=alert]").text()).toMatch(/username and a password/);
    expect(posts(calls)).toHaveLength(0);
  });

  it("offers the provider's sign-in beside the password form", async () => {
    mockFetch({ "GET /api/auth/options": json(200, SSO_ON) });
    wrapper = mount(LoginForm);
    await settle();
    const start = wrapper.find("[data-testid=sso-start]");
    expect(start.text()).toBe("Sign in with Acme SSO");
    expect(start.attributes("href")).toBe("/oidc/authenticate/");
    expect(wrapper.find("#login-password").exists()).toBe(true);
  });

  it("hides the password form when passwords are off, but the break-glass admin can open it", async () => {
    mockFetch({ "GET /api/auth/options": json(200, { ...SSO_ON, local_passwords: false }) });
    wrapper = mount(LoginForm);
    await settle();
    expect(wrapper.find("#login-password").exists()).toBe(false);
    await wrapper.find("button").trigger("click");
    expect(wrapper.find("#login-password").exists()).toBe(true);
    expect(wrapper.text()).toContain("Break-glass sign-in");
  });

  it("says why the provider's sign-in failed and drops the reason from the address", async () => {
    window.history.replaceState(null, "", "/?sso_error=denied#/agents");
    mockFetch({ "GET /api/auth/options": json(200, SSO_ON) });
    wrapper = mount(LoginForm);
    await settle();
    expect(wrapper.find("[data-testid=sso-error]").text()).toBe("Sign-in with Acme SSO was cancelled or refused.");
    expect(window.location.search).toBe("");
    expect(window.location.hash).toBe("#/agents");
    window.history.replaceState(null, "", "/");
  });
});

describe("SubscriptionForm", () => {
  async function fill(w, { name = "team", provider = "anthropic", token = PLAN } = {}) {
    await w.find("#add-name").setValue(name);
    await w.find("#add-provider").setValue(provider);
    await w.find("#add-token").setValue(token);
    await w.find("form").trigger("submit");
    await settle();
  }

  it("refuses an API key as a plan token without sending it", async () => {
    const { calls } = mockFetch({});
    wrapper = mount(SubscriptionForm);
    await fill(wrapper, { token: API_KEY });
    expect(wrapper.find("#add-token-error").text()).toMatch(/platform API key setting/);
    expect(wrapper.find("#add-token").attributes("aria-invalid")).toBe("true");
    expect(calls).toHaveLength(0);
  });

  it("offers each provider's plans and checks Codex tokens as JWTs", async () => {
    const { calls } = mockFetch({});
    wrapper = mount(SubscriptionForm);
    await wrapper.find("#add-provider").setValue("openai-codex");
    const plans = wrapper.findAll("#add-plan option").map((o) => o.text());
    expect(plans).toContain("ChatGPT Plus");
    expect(plans).not.toContain("Claude Pro");
    await fill(wrapper, { provider: "openai-codex", token: PLAN });
    expect(wrapper.find("#add-token-error").text()).toMatch(/API key|JWT/);
    expect(calls).toHaveLength(0);
  });

  it("posts a valid token once and clears it from the form", async () => {
    const saved = { id: 3, name: "team", token_fingerprint: PLAN.slice(-4) };
    const { calls } = mockFetch({ "POST /api/subscriptions": json(201, saved) });
    wrapper = mount(SubscriptionForm);
    await fill(wrapper);
    expect(calls).toHaveLength(1);
    expect(calls[0].body).toEqual({ name: "team", provider: "anthropic", plan_type: "pro", token: PLAN });
    expect(wrapper.emitted("saved")[0][0]).toEqual(saved);
    expect(wrapper.find("#add-token").element.value).toBe("");
  });

  it("puts the server's field errors next to their fields", async () => {
    mockFetch({ "POST /api/subscriptions": json(409, { provider: ["'team' has agents assigned; unassign them first."] }) });
    wrapper = mount(SubscriptionForm);
    await fill(wrapper);
    expect(wrapper.find("#add-provider-error").text()).toMatch(/unassign them first/);
    expect(wrapper.find("#add-token").element.value).toBe("");
  });

  it("rotates with the name fixed", async () => {
    const { calls } = mockFetch({ "POST /api/subscriptions": json(200, { id: 1, name: "max", token_fingerprint: "pppp" }) });
    wrapper = mount(SubscriptionForm, { props: { existing: { id: 1, name: "max", provider: "anthropic", plan_type: "max-20x" } } });
    expect(wrapper.find("#rotate-1-name").attributes("readonly")).toBeDefined();
    await wrapper.find("#rotate-1-token").setValue(PLAN);
    await wrapper.find("form").trigger("submit");
    await settle();
    expect(calls[0].body).toMatchObject({ name: "max", plan_type: "max-20x", token: PLAN });
  });
});

describe("PressureCell", () => {
  const usage = (data) => ({ state: "ok", data, reading: readUsage(data, NOW) });
  const fresh = {
    state: "reading",
    gate: "usable",
    status: "ok",
    fetched_at: "2026-11-30T11:59:00Z",
    age_seconds: 60,
    windows: {
      five_hour: { utilization: 62.5, resets_at: "2026-11-30T13:30:00Z", status: "allowed" },
      seven_day: { utilization: 91, resets_at: "2026-12-02T12:00:00Z", status: "allowed_warning" },
    },
  };

  it("draws both bars with countdowns while the reading is fresh", () => {
    wrapper = mount(PressureCell, { props: { usage: usage({ headroom: fresh, rate_limited_now: false }), now: NOW } });
    const meters = wrapper.findAll("[role=meter]");
    expect(meters.map((m) => m.attributes("aria-valuenow"))).toEqual(["62.5", "91"]);
    expect(wrapper.text()).toContain("62.5% used · resets in 1 h 30 min");
    expect(wrapper.text()).toContain("91% used · resets in 2 d");
    expect(meters[1].classes()).toContain("danger");
    expect(wrapper.find("[data-testid=rate-limited-chip]").exists()).toBe(false);
  });

  it.each([
    ["stale", "too old to trust"],
    ["window_reset", "has reset since"],
    ["no_answer", "got no answer"],
  ])("shows no live figures from a %s reading, and says why", (gate, why) => {
    const old = { ...fresh, gate, fetched_at: "2026-11-30T09:00:00Z" };
    wrapper = mount(PressureCell, { props: { usage: usage({ headroom: old }), now: NOW } });
    expect(wrapper.findAll("[role=meter]")).toHaveLength(0);
    expect(wrapper.find("[data-testid=no-live-figures]").text()).toContain(why);
    expect(wrapper.text()).toContain("read 3 h ago");
  });

  it("says when there is no reading yet, and when the store is down", () => {
    wrapper = mount(PressureCell, { props: { usage: usage({ headroom: { state: "no_reading", gate: "absent", windows: {} } }), now: NOW } });
    expect(wrapper.text()).toContain("No reading yet");
    wrapper.unmount();
    wrapper = mount(PressureCell, { props: { usage: usage({ headroom: { state: "unreachable", gate: "absent", windows: {} } }), now: NOW } });
    expect(wrapper.text()).toContain("store is unreachable");
  });

  it("shows the rate-limited chip only for a real rate limit, and a dead token as a token problem", () => {
    wrapper = mount(PressureCell, { props: { usage: usage({ headroom: fresh, rate_limited_now: true }), now: NOW } });
    expect(wrapper.find("[data-testid=rate-limited-chip]").text()).toBe("Rate limited");
    wrapper.unmount();
    const dead = { ...fresh, status: "invalid_token", windows: {} };
    wrapper = mount(PressureCell, { props: { usage: usage({ headroom: dead, rate_limited_now: false }), now: NOW } });
    expect(wrapper.find("[data-testid=rate-limited-chip]").exists()).toBe(false);
    expect(wrapper.find("[data-testid=auth-chip]").text()).toMatch(/Token refused/);
  });

  it("counts failure events by kind, or only in total when that is all the server said", () => {
    wrapper = mount(PressureCell, {
      props: { usage: usage({ headroom: fresh, failures_24h: { rate_limit: 2, auth: 1, unknown: 0 } }), now: NOW },
    });
    expect(wrapper.find("[data-testid=failure-events]").text()).toBe(
      "3 failure events (24h): 2 rate limit, 1 credential refused"
    );
    wrapper.unmount();
    wrapper = mount(PressureCell, { props: { usage: usage({ headroom: fresh, failures_24h: 1 }), now: NOW } });
    expect(wrapper.find("[data-testid=failure-events]").text()).toBe("1 failure event (24h)");
    wrapper.unmount();
    wrapper = mount(PressureCell, { props: { usage: usage({ headroom: fresh, failures_24h: 0 }), now: NOW } });
    expect(wrapper.find("[data-testid=failure-events]").text()).toBe("No failure events (24h)");
  });

  it("says plainly when the server has no usage endpoint", () => {
    wrapper = mount(PressureCell, { props: { usage: { state: "missing" }, now: NOW } });
    expect(wrapper.text()).toMatch(/Usage data not available/);
    expect(wrapper.findAll("[role=meter]")).toHaveLength(0);
  });
});

// The shapes GET /api/executions and GET /api/agents answered for a real switched
// turn (tests/browser/test_walk_browser.py runs one).
const REFUSED_A = {
  credential_kind: "subscription", subscription_id: 1, name: "plan-a", fingerprint: "xsCQ", why: "assigned",
  outcome: "refused", error_code: "rate_limit", status_code: 429, override_echo: "oauth_token", legacy: false,
  resets_at: "2026-12-01T12:31:00+00:00", at: "2026-12-01T07:31:48Z",
};
const SERVED_B = {
  credential_kind: "subscription", subscription_id: 2, name: "plan-b", fingerprint: "yQsg", why: "ranked",
  outcome: "served", error_code: "", status_code: 200, override_echo: "oauth_token", legacy: false, resets_at: null,
  at: "2026-12-01T07:31:49Z",
};
const WHY = { why: "ranked", refused: "plan-a refused", tier: "unknown", candidate_count: 1 };
// subscriptions/services.py switch_explanation(WHY): the API sends it beside `why`.
const EXPLANATION =
  "plan-a refused; the turn was served here because no fresh headroom reading was available for it; it was chosen by load order.";

describe("ExecutionTrail", () => {
  it("lists every attempt in order and the switch the turn committed", () => {
    wrapper = mount(ExecutionTrail, {
      props: {
        execution: {
          status: "succeeded", walk_stop: "", attempts: [REFUSED_A, SERVED_B],
          subscription_switch: {
            from: 1, from_name: "plan-a", to: 2, to_name: "plan-b", kind: "subscription", why: WHY, explanation: EXPLANATION,
            attempts: 2, committed: true,
          },
        },
      },
    });
    const items = wrapper.findAll("ol li");
    expect(items.map((li) => li.attributes("data-outcome"))).toEqual(["refused", "served"]);
    expect(items[0].text()).toContain("plan-a");
    expect(items[0].text()).toContain("its assigned subscription");
    expect(items[0].text()).toContain("rate_limit, HTTP 429");
    expect(items[1].text()).toContain("plan-b");
    expect(items[1].text()).toContain("next best by headroom");
    expect(items[1].find(".chip").text()).toBe("served");
    expect(wrapper.find("[data-testid=switch]").text()).toBe("Switched plan-a → plan-b. The agent now runs on plan-b.");
    expect(wrapper.find("[data-testid=switch-reason]").text()).toBe(EXPLANATION);
  });

  it("names a switch's origin from the switch, not from the trail", () => {
    // The trail may not hold the origin at all (a pre-dispatch route never tried it).
    wrapper = mount(ExecutionTrail, {
      props: {
        execution: {
          status: "succeeded", walk_stop: "", attempts: [SERVED_B],
          subscription_switch: {
            from: 1, from_name: "plan-a", to: 2, to_name: "plan-b", kind: "subscription", why: WHY, explanation: EXPLANATION,
            attempts: 1, committed: true,
          },
        },
      },
    });
    expect(wrapper.find("[data-testid=switch]").text()).toBe("Switched plan-a → plan-b. The agent now runs on plan-b.");
  });

  it("shows an exhausted walk's stop and earliest reset, and no switch", () => {
    const KEY = { credential_kind: "api_key", subscription_id: null, name: "", fingerprint: "kkkk", why: "api_key", outcome: "refused", error_code: "billing", status_code: 400 };
    wrapper = mount(ExecutionTrail, {
      props: {
        execution: {
          status: "failed", walk_stop: "exhausted", earliest_reset: "2026-12-01T12:31:00Z", retryable: false,
          attempts: [REFUSED_A, KEY], subscription_switch: null,
        },
      },
    });
    expect(wrapper.findAll("ol li")[1].text()).toContain("platform API key");
    expect(wrapper.findAll("ol li")[1].text()).toContain("last rung, billed per token");
    expect(wrapper.find("[data-testid=switch]").exists()).toBe(false);
    expect(wrapper.find("[data-testid=walk-stop]").text()).toMatch(/^Every candidate refused\. Earliest known reset: .+\.$/);
  });

  it("says when auto-switch was off and nothing switched", () => {
    wrapper = mount(ExecutionTrail, { props: { execution: { status: "failed", walk_stop: "auto_switch_off", attempts: [REFUSED_A] } } });
    expect(wrapper.find("[data-testid=walk-stop]").text()).toBe("Auto-switch is off: the refusal was recorded and nothing switched.");
  });

  it("says when no attempt was made", () => {
    wrapper = mount(ExecutionTrail, { props: { execution: { status: "failed", walk_stop: "", attempts: [] } } });
    expect(wrapper.text()).toBe("No attempt was made.");
  });
});

describe("LastSwitch", () => {
  const at = "2026-11-30T11:48:00Z";

  it("shows from → to, the API's reason sentence and when", () => {
    wrapper = mount(LastSwitch, {
      props: {
        agent: {
          last_switch: { from: 1, from_name: "plan-a", to: 2, to_name: "plan-b", why: WHY, explanation: EXPLANATION, at },
          on_api_key_since: null,
        },
        now: NOW,
      },
    });
    expect(wrapper.find("strong").text()).toBe("plan-a → plan-b");
    expect(wrapper.find("[data-testid=switch-reason]").text()).toBe(EXPLANATION);
    expect(wrapper.find("time").attributes("datetime")).toBe(at);
    expect(wrapper.text()).toContain("(12 min ago)");
    expect(wrapper.find("[data-testid=on-api-key]").exists()).toBe(false);
  });

  it("shows a switch recorded before the API sent names and a sentence by id and what refused", () => {
    wrapper = mount(LastSwitch, {
      props: { agent: { last_switch: { from: 1, to: 2, to_name: "plan-b", why: WHY, at }, on_api_key_since: null }, now: NOW },
    });
    expect(wrapper.find("strong").text()).toBe("subscription #1 → plan-b");
    expect(wrapper.find("[data-testid=switch-reason]").text()).toBe("plan-a refused");
  });

  it("says an agent never switched, and since when it bills the platform key", () => {
    wrapper = mount(LastSwitch, { props: { agent: { last_switch: {}, on_api_key_since: "2026-11-30T10:00:00Z" }, now: NOW } });
    expect(wrapper.text()).toContain("Never switched");
    expect(wrapper.find("[data-testid=on-api-key]").text()).toMatch(/^On the platform API key since .+: every subscription refused/);
  });
});
