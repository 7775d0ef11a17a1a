import { describe, expect, it } from "vitest";
import { credentialName, hasSwitch, readAttempt, readSwitch, switchFrom, switchReason, switchTo } from "./walk.js";

const NAMES = new Map([
  [1, "plan-a"],
  [2, "plan-b"],
]);

describe("credentialName", () => {
  it.each([
    [{ credential_kind: "api_key", subscription_id: null, name: "" }, "platform API key"],
    [{ credential_kind: "subscription", subscription_id: 1, name: "plan-a" }, "plan-a"],
    // Attempts recorded without a name fall back to the subscription list, then the id.
    [{ credential_kind: "subscription", subscription_id: 2, name: "" }, "plan-b"],
    [{ credential_kind: "subscription", subscription_id: 9, name: "" }, "subscription #9"],
    [{ credential_kind: "none", subscription_id: null, name: "" }, "no credential"],
  ])("names %o as %s", (attempt, expected) => {
    expect(credentialName(attempt, NAMES)).toBe(expected);
  });
});

describe("readAttempt", () => {
  it("reads a refusal with its code, status and reset", () => {
    const a = readAttempt({
      credential_kind: "subscription", subscription_id: 1, name: "plan-a", fingerprint: "Ab12", why: "assigned",
      outcome: "refused", error_code: "rate_limit", status_code: 429, legacy: false, resets_at: "2026-12-01T12:31:00+00:00",
    });
    expect(a).toEqual({
      credential: "plan-a", fingerprint: "Ab12", why: "its assigned subscription", served: false, outcome: "refused",
      detail: "rate_limit, HTTP 429", legacy: false, resetsAt: "2026-12-01T12:31:00+00:00",
    });
  });

  it("gives a served attempt no error detail", () => {
    const a = readAttempt({ credential_kind: "api_key", why: "api_key", outcome: "served", error_code: "", status_code: 200 });
    expect([a.credential, a.why, a.outcome, a.detail]).toEqual(["platform API key", "last rung, billed per token", "served", ""]);
  });

  it("shows a reason it does not know by its code rather than hide it", () => {
    expect(readAttempt({ credential_kind: "api_key", why: "something_new", outcome: "served" }).why).toBe("something_new");
  });

  it("names every reason the walk gives (routing/walk.py Why)", () => {
    for (const why of ["assigned", "pre_dispatch", "ranked", "readmitted", "last_resort", "api_key", "concurrent_switch", "retry", "placement"]) {
      expect(readAttempt({ credential_kind: "subscription", why, outcome: "served" }).why).not.toBe(why);
    }
  });
});

describe("switchReason", () => {
  it("shows the sentence the API sends, as sent", () => {
    // Deliberately unlike anything the panel could word itself: the API owns it.
    const sw = { why: { why: "ranked", refused: "plan-a refused", tier: "unknown" }, explanation: "The server's own sentence." };
    expect(switchReason(sw)).toBe("The server's own sentence.");
  });

  it("falls back to what refused for a switch recorded before the API sent a sentence", () => {
    expect(switchReason({ why: { why: "ranked", refused: "plan-a refused", tier: "unknown" } })).toBe("plan-a refused");
    expect(switchReason({ why: {} })).toBe("");
    expect(switchReason({})).toBe("");
  });
});

describe("switchFrom and switchTo", () => {
  it("name both ends from the switch itself", () => {
    expect(switchFrom({ from: 1, from_name: "plan-a" })).toBe("plan-a");
    expect(switchTo({ to: 2, to_name: "plan-b" })).toBe("plan-b");
  });

  it("fall back to the id for a switch recorded without names", () => {
    expect(switchFrom({ from: 7 })).toBe("subscription #7");
    expect(switchFrom({ from: 7, from_name: null })).toBe("subscription #7");
    expect(switchTo({ to: 8, to_name: "" })).toBe("subscription #8");
    expect(switchFrom({ from: null, from_name: null })).toBe("no subscription");
  });
});

describe("readSwitch", () => {
  const WHY = { why: "ranked", refused: "plan-a refused", tier: "unknown" };
  const SWITCH = { from: 1, from_name: "plan-a", to: 2, to_name: "plan-b", kind: "subscription", why: WHY, explanation: "The server's own sentence." };

  it("reads a committed switch with the names and the sentence the API sent", () => {
    const sw = readSwitch({ subscription_switch: { ...SWITCH, committed: true } });
    expect(sw).toEqual({
      from: "plan-a", to: "plan-b", committed: true, label: "Switched", note: "The agent now runs on plan-b.",
      reason: "The server's own sentence.",
    });
  });

  it("says so when a concurrent turn had already moved the assignment", () => {
    const sw = readSwitch({ subscription_switch: { ...SWITCH, committed: false } });
    expect([sw.label, sw.committed, sw.note]).toEqual(["Served elsewhere", false, "Not committed: another turn had already moved the assignment."]);
  });

  it("says a throttle walked the turn and the agent stays on its plan", () => {
    const sw = readSwitch({ subscription_switch: { ...SWITCH, why: { ...WHY, throttled: true }, committed: false } });
    expect([sw.label, sw.committed, sw.note]).toEqual([
      "Served elsewhere (throttle)",
      false,
      "Not committed: plan-a was throttled, backed off a minute; the agent stays on it.",
    ]);
  });

  it("says a key-served turn moved no assignment", () => {
    const sw = readSwitch({ subscription_switch: { ...SWITCH, to: null, to_name: "", kind: "api_key", committed: false } });
    // The headroom sentence is about a subscription rung; for the key the note says it.
    expect([sw.from, sw.to, sw.note, sw.reason]).toEqual(["plan-a", "platform API key", "Billed per token; the assignment is unchanged.", ""]);
  });

  it("reads a switch recorded before the API sent names and a sentence", () => {
    const sw = readSwitch({ subscription_switch: { from: 1, to: 2, to_name: "plan-b", kind: "subscription", why: WHY, committed: true } });
    expect([sw.from, sw.to, sw.reason]).toEqual(["subscription #1", "plan-b", "plan-a refused"]);
  });

  it("is null for a turn that did not switch", () => {
    expect(readSwitch({ subscription_switch: null })).toBeNull();
  });
});

describe("hasSwitch", () => {
  it("treats the API's empty object as no switch", () => {
    expect(hasSwitch({})).toBe(false);
    expect(hasSwitch(null)).toBe(false);
    expect(hasSwitch({ from: 1, to: 2, to_name: "plan-b", why: {}, at: "2026-12-01T07:31:49Z" })).toBe(true);
  });
});
