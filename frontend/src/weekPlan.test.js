import { describe, expect, it } from "vitest";
import { formatUsd, planSummary, plannedCell, spillLine, weekInstant } from "./weekPlan.js";

const NOW = Date.parse("2030-01-01T12:12:00Z");

describe("week plan", () => {
  it("says an instant as the explainer does, in UTC", () => {
    expect(weekInstant("2030-01-03T09:00:00Z")).toBe("Thu 09:00");
    expect(weekInstant(null)).toBe("");
  });

  it("gives an agent's planned cell with its reason as the title", () => {
    const planned = { where: "max-b", until: "2030-01-03T09:00:00Z", because: "its weekly window resets first" };
    expect(plannedCell(planned)).toEqual({ label: "max-b until Thu 09:00", title: "its weekly window resets first" });
    expect(plannedCell({ ...planned, where: "the platform key" }).label).toBe("the platform key until Thu 09:00");
    expect(plannedCell(null)).toBeNull();
  });

  it("says the spill in tokens, family and range", () => {
    const spill = { family: "opus", since: "2030-01-05T12:00:00Z", until: "2030-01-06T12:00:00Z", tokens: 1.5e6 };
    expect(spillLine(spill)).toBe("1.5 M tokens of opus on the key, Sat 12:00 – Sun 12:00");
    expect(spillLine({ ...spill, family: null, tokens: 42_000 })).toBe(
      "42 k tokens of other models on the key, Sat 12:00 – Sun 12:00",
    );
  });

  it("heads the summary with the plan's age and the key's spend", () => {
    expect(planSummary({ made_at: "2030-01-01T12:00:00Z", key_usd: 3.2 }, NOW)).toBe(
      "Planned 12 min ago: the platform key takes $3.20 over the next 7 days",
    );
    expect(planSummary({ made_at: null }, NOW)).toBe("No week plan yet: turns follow the placement rules.");
    expect(formatUsd(null)).toBe("");
  });
});
