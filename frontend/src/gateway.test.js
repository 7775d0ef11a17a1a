import { describe, expect, it } from "vitest";
import {
  changeBody,
  createBody,
  formatUsd,
  fromLocalInput,
  keyForm,
  keyFormProblems,
  limitWords,
  reachWords,
  servedByWords,
  streamAge,
  toLocalInput,
  tokenWords,
  usageWindow,
} from "./gateway.js";

const NOW = Date.parse("2026-06-01T12:00:00Z");
const KEY = {
  id: 7, name: "laptop", owner: "operator", prefix: "AbC123", status: "active",
  expires_at: null, revoked_at: null, providers: ["anthropic"], model_families: [],
  requests_per_minute: 60, max_streams: null, daily_tokens: 100000, monthly_tokens: null,
  daily_usd: "5.0000", monthly_usd: null,
};

describe("a key's form", () => {
  it("sends only what was given when creating", () => {
    const form = { ...keyForm(), name: " laptop " };
    form.limits.daily_tokens = "1000";
    form.limits.daily_usd = "2.50";
    form.providers = ["anthropic"];
    expect(createBody(form)).toEqual({ name: "laptop", providers: ["anthropic"], daily_tokens: 1000, daily_usd: "2.50" });
  });

  it("sends the expiry as an instant with its offset", () => {
    const local = toLocalInput("2026-07-01T10:30:00Z");
    expect(fromLocalInput(local)).toBe("2026-07-01T10:30:00.000Z");
    expect(createBody({ ...keyForm(), name: "k", expires: local }).expires_at).toBe("2026-07-01T10:30:00.000Z");
  });

  it("sends only what changed, and null for an emptied limit", () => {
    const form = keyForm(KEY);
    expect(changeBody(form, KEY)).toEqual({});
    form.limits.daily_usd = "5"; // the same dollars, written differently
    form.limits.requests_per_minute = "30";
    form.limits.daily_tokens = "";
    form.model_families = ["sonnet"];
    expect(changeBody(form, KEY)).toEqual({ requests_per_minute: 30, daily_tokens: null, model_families: ["sonnet"] });
  });

  it("treats a re-ordered list as unchanged", () => {
    const key = { ...KEY, providers: ["anthropic", "openai-codex"] };
    const form = keyForm(key);
    form.providers = ["openai-codex", "anthropic"];
    expect(changeBody(form, key)).toEqual({});
  });

  it("catches a missing name, a bad limit and a past expiry before sending", () => {
    const form = { ...keyForm(), name: "", expires: toLocalInput("2026-05-01T00:00:00Z") };
    form.limits.max_streams = "0";
    form.limits.daily_usd = "1.23456";
    form.limits.monthly_tokens = "1.5";
    expect(keyFormProblems(form, NOW)).toEqual({
      name: "A name is required.",
      expires_at: "The expiry must be in the future.",
      max_streams: "A whole number above 0.",
      monthly_tokens: "A whole number above 0.",
      daily_usd: "Dollars above 0, at most 4 decimals (e.g. 2.50).",
    });
    expect(keyFormProblems({ ...keyForm(), name: "ok key" }, NOW)).toEqual({});
    expect(keyFormProblems({ ...keyForm(), name: "bad\nname" }, NOW).name).toMatch(/letters/);
  });
});

describe("words", () => {
  it("says a key's limits and reach", () => {
    expect(limitWords(KEY)).toEqual(["60/min", "100,000 tokens/day", "$5.00/day"]);
    expect(limitWords({ ...KEY, requests_per_minute: null, daily_tokens: null, daily_usd: null })).toEqual([]);
    expect(reachWords(KEY)).toBe("anthropic; every model");
  });

  it("keeps what cents would round away", () => {
    expect(formatUsd("0.530100")).toBe("$0.53");
    expect(formatUsd("0.000100")).toBe("$0.0001");
    expect(formatUsd("0")).toBe("$0.00");
  });

  it("says tokens by kind and who served", () => {
    expect(tokenWords({ input_tokens: 300, output_tokens: 50, cache_read_tokens: 1000, cache_write_tokens: 0 })).toBe(
      "300 in · 50 out · 1,000 cache read"
    );
    expect(servedByWords({ kind: "subscription", name: "max-a" })).toBe("max-a (plan)");
    expect(servedByWords({ kind: "api_key", name: "platform" })).toBe("platform (platform key)");
    expect(servedByWords({ kind: "", name: "" })).toBe("not served");
  });

  it("windows the usage and ages a stream", () => {
    expect(usageWindow(1, NOW)).toEqual({ since: "2026-05-31T12:00:00.000Z", until: "2026-06-01T12:00:00.000Z" });
    expect(streamAge({ started_at: "2026-06-01T11:57:00+00:00" }, NOW)).toBe("3 min");
    expect(streamAge({ started_at: "garbage" }, NOW)).toBe("");
  });
});
