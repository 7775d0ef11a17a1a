import { afterEach, describe, expect, it } from "vitest";
import { mount } from "@vue/test-utils";
import RoutingExplain from "./RoutingExplain.vue";
import { json, mockFetch, settle } from "../test-utils.js";

const NOW = Date.parse("2026-11-30T12:00:00Z");
const IN = (minutes) => new Date(NOW + minutes * 60000).toISOString();
const URL = "GET /api/agents/bot/routing";

function figures(over = {}) {
  return {
    tier: "measured",
    band: 2,
    fullness: 20,
    five_hour: 10,
    seven_day: 20,
    limiting_window: "seven_day",
    resets_at: IN(3 * 24 * 60),
    reading_age_seconds: 60,
    ...over,
  };
}

function explanation(over = {}) {
  return {
    agent: "bot",
    at: new Date(NOW).toISOString(),
    model: "claude-sonnet-4-5",
    family: "seven_day_sonnet",
    routing_policy: "thrifty",
    autonomous: false,
    assigned: {
      subscription_id: 1,
      name: "plan-a",
      refusing: true,
      decided_by: "reading",
      figures: figures({ tier: "refusing", fullness: null, limiting_window: "five_hour", resets_at: IN(40) }),
      last_refusal_at: null,
      last_refusal_kind: null,
      last_refusal_resets_at: null,
    },
    pre_dispatch: "routed",
    first: { position: 1, kind: "subscription", subscription_id: 2, name: "plan-b", why: "pre_dispatch", figures: figures() },
    rungs: [
      { position: 1, kind: "subscription", subscription_id: 2, name: "plan-b", why: "pre_dispatch", figures: figures() },
      { position: 2, kind: "api_key", subscription_id: null, name: "platform API key", why: "api_key", figures: {} },
    ],
    walk_stop: "exhausted",
    excluded: [
      {
        subscription_id: 3,
        name: "plan-c",
        reason: "refusing",
        detail: "a fresh reading says it refuses (five_hour)",
        figures: figures({ tier: "refusing", limiting_window: "five_hour", resets_at: IN(90) }),
        last_refusal_at: null,
        last_refusal_resets_at: null,
      },
    ],
    key: { available: true, closed: null, refused_at: null, failure_kind: null, reopens_at: null },
    ranking_fallback: null,
    strategy: "banded",
    breaker: "closed",
    summary: [],
    ...over,
  };
}

let wrapper;
afterEach(() => wrapper?.unmount());

describe("RoutingExplain", () => {
  it("asks nothing until opened, then shows where the next turn runs and why", async () => {
    const { calls } = mockFetch({ [URL]: json(200, explanation()) });
    wrapper = mount(RoutingExplain, { props: { agentName: "bot", now: NOW } });
    expect(calls).toHaveLength(0);

    await wrapper.find("button").trigger("click");
    await settle();

    expect(calls.map((c) => c.url)).toEqual(["/api/agents/bot/routing"]);
    expect(wrapper.find("[data-testid=routing-first]").text()).toBe(
      "Next turn: plan-b (routed before the first attempt)",
    );
    expect(wrapper.find("[data-testid=routing-assigned]").text()).toContain(
      "plan-a: known not to serve: the first attempt runs elsewhere",
    );
    expect(wrapper.find("[data-testid=routing-assigned]").text()).toContain("limited by five_hour, resets in 40 min");
    const order = wrapper.findAll("[data-testid=routing-order] li").map((li) => li.text());
    expect(order).toHaveLength(2);
    expect(order[0]).toContain("plan-b");
    expect(order[0]).toContain("measured, 20% used, limited by seven_day, resets in 3 d");
    expect(order[1]).toContain("platform API key — the key rung");
    expect(wrapper.find("[data-testid=routing-excluded]").text()).toBe(
      "plan-c: a fresh reading says it refuses (five_hour) (resets in 1 h 30 min)",
    );
    expect(wrapper.find("[data-testid=routing-key]").text()).toContain("available as the last rung");
  });

  it("says whether an exhausted autonomous turn parks, and until when", async () => {
    mockFetch({ [URL]: json(200, explanation({ ends: "fail", parks_until: IN(90) })) });
    wrapper = mount(RoutingExplain, { props: { agentName: "bot", now: NOW } });
    await wrapper.find("button").trigger("click");
    await settle();
    expect(wrapper.find("[data-testid=routing-parks]").text()).toBe(
      "Exhausted, an autonomous turn parks: it runs again in 1 h 30 min.",
    );
    wrapper.unmount();
    mockFetch({ [URL]: json(200, explanation({ ends: "fail", parks_until: null })) });
    wrapper = mount(RoutingExplain, { props: { agentName: "bot", now: NOW } });
    await wrapper.find("button").trigger("click");
    await settle();
    expect(wrapper.find("[data-testid=routing-parks]").text()).toBe(
      "Exhausted, an autonomous turn fails (it would not park).",
    );
  });

  it("says why the key rung is closed and when it reopens", async () => {
    const key = { available: false, closed: "refused_recently", refused_at: IN(-2), failure_kind: "rate_limit", reopens_at: IN(3) };
    mockFetch({ [URL]: json(200, explanation({ key })) });
    wrapper = mount(RoutingExplain, { props: { agentName: "bot", now: NOW } });
    await wrapper.find("button").trigger("click");
    await settle();
    expect(wrapper.find("[data-testid=routing-key]").text()).toBe(
      "Platform API key: closed: the key was refused recently (reopens in 3 min)",
    );
  });

  it("names the policy's verdict, the breaker, a balanced score, a forecast and a closed budget", async () => {
    const assigned = {
      ...explanation().assigned,
      refusing: false,
      policy_refusal: "its routing policy is subscription-only and its subscription 'plan-a' is not a plan that refuses past its quota",
      figures: figures({ score: 140, runs_out_at: IN(2) }),
    };
    const key = {
      available: false,
      closed: "budget",
      detail: "the platform key's daily budget of $5.00 for agent 'bot' is spent",
      refused_at: null,
      failure_kind: null,
      reopens_at: IN(600),
    };
    const first = { ...explanation().first, why: "policy" };
    mockFetch({
      [URL]: json(200, explanation({ assigned, key, first, pre_dispatch: "policy", breaker: "half_open", rungs: [first] })),
    });
    wrapper = mount(RoutingExplain, { props: { agentName: "bot", now: NOW } });
    await wrapper.find("button").trigger("click");
    await settle();
    const text = wrapper.find("[data-testid=routing-assigned]").text();
    expect(text).toContain("its routing policy forbids it");
    expect(text).toContain("score 140.0");
    expect(text).toContain("forecast to run out in 2 min");
    expect(text).toContain("Policy: its routing policy is subscription-only");
    expect(wrapper.find("[data-testid=routing-first]").text()).toBe("Next turn: plan-b (its policy's choice)");
    expect(wrapper.find("[data-testid=routing-breaker]").text()).toBe("The provider's circuit breaker is half-open.");
    expect(wrapper.find("[data-testid=routing-key]").text()).toBe(
      "Platform API key: closed: the platform key's daily budget of $5.00 for agent 'bot' is spent (reopens in 10 h)",
    );
  });

  it("says the assignment is paused, why the turn starts elsewhere, and the other paused plans", async () => {
    const assigned = {
      ...explanation().assigned,
      refusing: false,
      excluded: "paused",
      detail: "its subscription 'plan-a' is paused",
      figures: figures(),
    };
    const excluded = [
      { ...explanation().excluded[0], name: "plan-c", reason: "paused", detail: "paused by an admin", figures: figures({ resets_at: null }) },
    ];
    mockFetch({ [URL]: json(200, explanation({ assigned, excluded, pre_dispatch: "paused" })) });
    wrapper = mount(RoutingExplain, { props: { agentName: "bot", now: NOW } });
    await wrapper.find("button").trigger("click");
    await settle();
    const text = wrapper.find("[data-testid=routing-assigned]").text();
    expect(text).toContain("plan-a: paused by an admin: the turn starts on the best plan it may use");
    expect(text).toContain("its subscription 'plan-a' is paused");
    expect(wrapper.find("[data-testid=routing-excluded]").text()).toBe("plan-c: paused by an admin");
  });

  it("shows the server's refusal and loads again on refresh", async () => {
    let answer = json(404, { detail: "No agent named 'bot'." });
    const { calls } = mockFetch({ [URL]: () => answer });
    wrapper = mount(RoutingExplain, { props: { agentName: "bot", now: NOW } });
    await wrapper.find("button").trigger("click");
    await settle();
    expect(wrapper.find("[role=alert]").text()).toContain("No agent named 'bot'.");

    answer = json(200, explanation({ assigned: null, pre_dispatch: "no_assignment", excluded: [] }));
    await wrapper.find("button").trigger("click"); // close
    await wrapper.find("button").trigger("click"); // open again: still nothing loaded
    await settle();
    expect(calls).toHaveLength(2);
    expect(wrapper.text()).toContain("no subscription: it runs on what it boots with and never walks");
  });
});
