import { describe, expect, it } from "vitest";
import { formatUsd, reportRange, spendSeries, spendSummary } from "./reports.js";

const NOW = Date.parse("2026-11-30T12:00:00Z");

describe("reports.js", () => {
  it("asks for the last N UTC days, today included", () => {
    expect(reportRange(7, NOW)).toEqual({ from: "2026-11-24", to: "2026-11-30" });
    expect(reportRange(1, NOW)).toEqual({ from: "2026-11-30", to: "2026-11-30" });
  });

  it("draws one point per day at its UTC midnight", () => {
    const report = { rows: [{ group: "2026-11-29", key_spend_usd: 0 }, { group: "2026-11-30", key_spend_usd: 1.25 }] };
    expect(spendSeries(report)).toEqual([
      { x: Date.parse("2026-11-29T00:00:00Z"), y: 0 },
      { x: Date.parse("2026-11-30T00:00:00Z"), y: 1.25 },
    ]);
  });

  it("says the totals in one sentence", () => {
    const report = { totals: { key_spend_usd: 0.25, turns: 1, refusals: 2, switches: 1 } };
    expect(spendSummary(report, 30)).toBe(
      "$0.2500 on the platform API key over the last 30 days; 1 turn, 2 refusal(s), 1 switch(es).",
    );
    expect(formatUsd(12)).toBe("$12.00");
    expect(formatUsd(0)).toBe("$0.00");
  });
});
