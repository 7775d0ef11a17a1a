import { describe, expect, it } from "vitest";
import { pressureLevel, readHistory, readUsage } from "./headroom.js";
import { agentRoute } from "./routes.js";

const NOW = Date.parse("2026-11-30T12:00:00Z");

describe("readUsage", () => {
  const usageBody = {
    headroom: {
      state: "reading",
      tier: "measured",
      gate: "usable",
      status: "ok",
      fetched_at: "2026-11-30T11:58:00Z",
      age_seconds: 120,
      windows: { five_hour: { utilization: 42.5, resets_at: "2026-11-30T14:00:00Z", status: "allowed" } },
    },
    failures_24h: { rate_limit: 2, auth: 1, unknown: 0 },
    rate_limited_now: false,
    rate_limited_source: "reading",
  };

  it("reads windows, the server's freshness verdict, the rate limit and failures by kind", () => {
    const r = readUsage(usageBody, NOW);
    expect(r.windows.five_hour.utilization).toBe(42.5);
    expect(r.windows.seven_day).toBeNull();
    expect(r.ageSeconds).toBe(120);
    expect(r.fresh).toBe(true);
    expect(r.rateLimitedNow).toBe(false);
    expect(r.failures).toEqual([{ kind: "rate_limit", count: 2 }, { kind: "auth", count: 1 }]);
    expect(r.failureTotal).toBe(3);
  });

  it.each(["stale", "window_reset", "no_answer", "absent"])("a %s reading is not fresh", (gate) => {
    expect(readUsage({ ...usageBody, headroom: { ...usageBody.headroom, gate } }, NOW).fresh).toBe(false);
  });

  it("takes the fleet view's failure count without inventing a split", () => {
    const r = readUsage({ headroom: usageBody.headroom, failures_24h: 4, rate_limited_now: true }, NOW);
    expect(r.failureTotal).toBe(4);
    expect(r.failures).toBeNull();
  });

  it("keeps unknown as unknown", () => {
    const r = readUsage({ headroom: { state: "no_reading", gate: "absent", windows: {} } }, NOW);
    expect(r.rateLimitedNow).toBeNull();
    expect(r.failureTotal).toBeNull();
    expect(r.fetchedAt).toBeNull();
  });
});

describe("readHistory", () => {
  it("splits samples into sorted 5h and 7d series", () => {
    const series = readHistory({
      subscription_id: 1,
      window: "24h",
      samples: [
        { fetched_at: "2026-11-30T11:00:00Z", status: "ok", five_hour: 20, seven_day: 50 },
        { fetched_at: "2026-11-30T10:00:00Z", status: "ok", five_hour: 10, seven_day: null },
      ],
    });
    expect(series.five_hour.map((p) => p.y)).toEqual([10, 20]);
    expect(series.seven_day.map((p) => p.y)).toEqual([50]);
  });
});

describe("pressureLevel", () => {
  it.each([
    [74.9, "ok"],
    [75, "warn"],
    [89.9, "warn"],
    [90, "danger"],
    [null, "unknown"],
  ])("%s -> %s", (value, level) => expect(pressureLevel(value)).toBe(level));
});

describe("agentRoute", () => {
  const base = { name: "a", subscription: null, use_platform_api_key: true, routing_policy: "subscription_first" };
  const sub = { id: 1, name: "max" };
  const ctx = { subscriptionProvider: "anthropic", fallbackEnabled: true, keyConfigured: true };
  it.each([
    ["assigned", { ...base, subscription: sub }, ctx, "subscription", "Subscription max"],
    ["no sub, key allowed and set", base, ctx, "platform-key", "Platform API key"],
    ["no sub, key allowed, none set", base, { ...ctx, keyConfigured: false }, "none", "No route"],
    ["no sub, key forbidden", { ...base, use_platform_api_key: false }, ctx, "none", "No route"],
    ["unset follows fallback on", { ...base, use_platform_api_key: null }, ctx, "platform-key", "Platform API key"],
    ["unset follows fallback off", { ...base, use_platform_api_key: null }, { ...ctx, fallbackEnabled: false }, "none", "No route"],
    // The admin's switch is a ceiling: the agent's own true does not reopen it.
    ["true does not widen fallback off", base, { ...ctx, fallbackEnabled: false }, "none", "No route"],
    ["the server's verdict decides", { ...base, platform_key: { allowed: false, reason: "fallback_off" } }, ctx, "none", "No route"],
    ["the server's verdict allows", { ...base, use_platform_api_key: null, platform_key: { allowed: true, reason: null } }, ctx, "platform-key", "Platform API key"],
    ["codex sub is unusable", { ...base, subscription: sub }, { ...ctx, subscriptionProvider: "openai-codex" }, "platform-key", "Platform API key"],
    ["unknown key state", base, { ...ctx, keyConfigured: null }, "unknown", "Unknown"],
  ])("%s", (_, agent, context, kind, label) => {
    const route = agentRoute(agent, context);
    expect(route.kind).toBe(kind);
    expect(route.label).toBe(label);
  });
});
