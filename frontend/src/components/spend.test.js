import { afterEach, describe, expect, it, vi } from "vitest";
import { mount } from "@vue/test-utils";
import SpendChart from "./SpendChart.vue";
import { json, mockFetch, settle } from "../test-utils.js";

// Chart.js needs a real canvas; record what it was asked to draw instead.
const drawn = [];
vi.mock("chart.js", () => {
  class Chart {
    static register() {}
    constructor(_canvas, config) {
      drawn.push(config);
    }
    destroy() {}
  }
  return { Chart, Filler: {}, Legend: {}, LinearScale: {}, LineController: {}, LineElement: {}, PointElement: {}, Tooltip: {} };
});

let wrapper;
afterEach(() => wrapper?.unmount());
const NOW = Date.parse("2026-11-30T12:00:00Z");

describe("SpendChart", () => {
  it("draws the key spend per day from the usage report and offers the CSVs", async () => {
    const { calls } = mockFetch({
      "GET /api/reports/usage": json(200, {
        group: "day",
        rows: [
          { group: "2026-11-29", key_spend_usd: 0 },
          { group: "2026-11-30", key_spend_usd: 1.5 },
        ],
        totals: { key_spend_usd: 1.5, turns: 4, refusals: 2, switches: 1 },
      }),
    });
    wrapper = mount(SpendChart, { props: { now: NOW } });
    await settle();
    expect(calls[0].url).toBe("/api/reports/usage?group=day&from=2026-11-01&to=2026-11-30");
    expect(drawn.at(-1).data.datasets[0].data).toEqual([
      { x: Date.parse("2026-11-29T00:00:00Z"), y: 0 },
      { x: Date.parse("2026-11-30T00:00:00Z"), y: 1.5 },
    ]);
    expect(wrapper.find("[data-testid=spend-summary]").text()).toBe(
      "$1.50 on the platform API key over the last 30 days; 4 turns, 2 refusal(s), 1 switch(es).",
    );
    const links = wrapper.findAll("a[download]").map((a) => a.attributes("href"));
    expect(links).toContain("/api/reports/usage?from=2026-11-01&to=2026-11-30&group=agent&format=csv");
    await wrapper.findAll("[aria-label='Report range'] button").find((b) => b.text() === "7 days").trigger("click");
    await settle();
    expect(calls.at(-1).url).toBe("/api/reports/usage?group=day&from=2026-11-24&to=2026-11-30");
  });

  it("says so when the server has no report endpoint", async () => {
    mockFetch({});
    wrapper = mount(SpendChart, { props: { now: NOW } });
    await settle();
    expect(wrapper.find("[data-testid=spend-unavailable]").exists()).toBe(true);
  });
});
