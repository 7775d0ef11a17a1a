import { describe, expect, it } from "vitest";
import { credentialName, hasSwitch, readAttempt, readSwitch, switchExplanation, switchFromName, trailNames } from "./walk.js";

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
});

describe("switchExplanation", () => {
  // The expected sentences are subscriptions/services.py switch_explanation()'s own
  // output for the same reasons: the panel and the notification must agree.
  it.each([
    [
      { why: "ranked", refused: "plan-a refused", tier: "measured", candidate_count: 2, seven_day: 40, five_hour: 12 },
      "plan-a refused; the turn was served here because it had the most headroom of 2 alternative(s) (40% of its weekly and 12% of its 5-hour limit used).",
    ],
    [
      { why: "readmitted", refused: "plan-a refused", tier: "unknown", readmitted: "window_reset" },
      "plan-a refused; the turn was served here because it was readmitted (window reset).",
    ],
    [
      { why: "last_resort", refused: "plan-a refused; plan-b refused", tier: null },
      "plan-a refused; plan-b refused; the turn was served here because it was the last resort (it had refused within the last 2 hours).",
    ],
    [
      { why: "ranked", refused: "plan-a refused", tier: "unknown" },
      "plan-a refused; the turn was served here because no fresh headroom reading was available for it; it was chosen by load order.",
    ],
    [
      {},
      "its subscription refused the turn; the turn was served here because no fresh headroom reading was available for it; it was chosen by load order.",
    ],
  ])("words %o", (why, sentence) => {
    expect(switchExplanation(why)).toBe(sentence);
  });
});

describe("readSwitch", () => {
  const attempts = [{ credential_kind: "subscription", subscription_id: 1, name: "plan-a", outcome: "refused" }];

  it("reads a committed switch, naming where it came from out of the trail", () => {
    const sw = readSwitch({ attempts, subscription_switch: { from: 1, to: 2, to_name: "plan-b", kind: "subscription", committed: true } });
    expect(sw).toEqual({ from: "plan-a", to: "plan-b", committed: true, label: "Switched", note: "The agent now runs on plan-b." });
  });

  it("says so when a concurrent turn had already moved the assignment", () => {
    const sw = readSwitch({ attempts, subscription_switch: { from: 1, to: 2, to_name: "plan-b", kind: "subscription", committed: false } });
    expect([sw.label, sw.committed, sw.note]).toEqual(["Served elsewhere", false, "Not committed: another turn had already moved the assignment."]);
  });

  it("says a key-served turn moved no assignment", () => {
    const sw = readSwitch({ attempts, subscription_switch: { from: 1, to: null, to_name: "", kind: "api_key", committed: false } });
    expect([sw.from, sw.to, sw.note]).toEqual(["plan-a", "platform API key", "Billed per token; the assignment is unchanged."]);
  });

  it("is null for a turn that did not switch", () => {
    expect(readSwitch({ attempts, subscription_switch: null })).toBeNull();
  });
});

describe("switchFromName and hasSwitch", () => {
  it("names the origin from the list when the trail does not", () => {
    expect(switchFromName(2, { names: NAMES })).toBe("plan-b");
    expect(switchFromName(7, { names: NAMES })).toBe("subscription #7");
    expect(switchFromName(null)).toBe("no subscription");
  });

  it("treats the API's empty object as no switch", () => {
    expect(hasSwitch({})).toBe(false);
    expect(hasSwitch(null)).toBe(false);
    expect(hasSwitch({ from: 1, to: 2, to_name: "plan-b", why: {}, at: "2026-12-01T07:31:49Z" })).toBe(true);
  });
});

describe("trailNames", () => {
  it("takes each subscription's newest name from the trails, and skips the key", () => {
    const executions = [
      { attempts: [{ credential_kind: "subscription", subscription_id: 1, name: "plan-a-renamed" }, { credential_kind: "api_key", subscription_id: null, name: "" }] },
      { attempts: [{ credential_kind: "subscription", subscription_id: 1, name: "plan-a" }, { credential_kind: "subscription", subscription_id: 2, name: "plan-b" }] },
      { attempts: [] },
    ];
    expect([...trailNames(executions)]).toEqual([[1, "plan-a-renamed"], [2, "plan-b"]]);
  });
});
