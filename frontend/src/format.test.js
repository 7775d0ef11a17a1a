import { describe, expect, it } from "vitest";
import { formatAge, formatDuration, formatPercent, formatReset } from "./format.js";

const NOW = Date.parse("2026-11-30T12:00:00Z");

describe("format", () => {
  it.each([
    [0, "0 s"],
    [59, "59 s"],
    [60, "1 min"],
    [3599, "59 min"],
    [3600, "1 h"],
    [3660, "1 h 1 min"],
    [86400, "1 d"],
    [90000, "1 d 1 h"],
  ])("formatDuration(%s) = %s", (seconds, text) => expect(formatDuration(seconds)).toBe(text));

  it("counts down to a reset and says when it has passed", () => {
    expect(formatReset("2026-11-30T14:14:00Z", NOW)).toBe("resets in 2 h 14 min");
    expect(formatReset("2026-11-30T12:00:00Z", NOW)).toBe("reset time passed");
    expect(formatReset(null, NOW)).toBeNull();
  });

  it("ages a reading", () => {
    expect(formatAge("2026-11-30T11:48:00Z", NOW)).toBe("12 min ago");
    expect(formatAge(undefined, NOW)).toBeNull();
  });

  it("prints percentages with at most one decimal", () => {
    expect(formatPercent(42)).toBe("42%");
    expect(formatPercent(42.25)).toBe("42.3%");
    expect(formatPercent(null)).toBeNull();
  });
});
