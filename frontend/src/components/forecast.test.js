import { afterEach, describe, expect, it, vi } from "vitest";
import { mount } from "@vue/test-utils";
import ForecastNote from "./ForecastNote.vue";
import SubscriptionsPage from "../pages/SubscriptionsPage.vue";
import { forecastLines, windowLabel } from "../forecast.js";
import { ADMIN, json, mockFetch, settle } from "../test-utils.js";

// Chart.js needs a real canvas (the details panel's chart); not under test here.
vi.mock("chart.js", () => {
  class Chart {
    static register() {}
    destroy() {}
  }
  return { Chart, Filler: {}, Legend: {}, LinearScale: {}, LineController: {}, LineElement: {}, PointElement: {}, Tooltip: {} };
});

const NOW = Date.parse("2026-11-30T12:00:00Z");
const at = (minutes) => new Date(NOW + minutes * 60_000).toISOString();

let wrapper;
afterEach(() => wrapper?.unmount());

function forecast(windows) {
  return { computed_at: at(-1), runs_out_at: null, windows };
}

describe("forecastLines", () => {
  it.each([
    [130, "runs out in ~2 h 10 min at this rate"],
    [1, "runs out in ~1 min at this rate"],
    [0.99, "runs out any moment at this rate"],
    [0, "runs out any moment at this rate"],
    [-5, "runs out any moment at this rate"],
  ])("says when a window runs out %s minutes from now", (minutes, text) => {
    const lines = forecastLines(forecast({ five_hour: { exhausts_at: at(minutes), burn_per_hour: 9.2, resets_at: at(240) } }), NOW);
    expect(lines.map((l) => [l.label, l.text, l.burn])).toEqual([["5h", text, 9.2]]);
  });

  it("lists the soonest window first", () => {
    const lines = forecastLines(
      forecast({
        five_hour: { exhausts_at: at(130), burn_per_hour: 9, resets_at: at(240) },
        seven_day_sonnet: { exhausts_at: at(90), burn_per_hour: 1, resets_at: null },
      }),
      NOW
    );
    expect(lines.map((l) => l.label)).toEqual(["7d Sonnet", "5h"]);
  });

  it.each([
    ["no forecast", null],
    ["no window running out", forecast({})],
    ["a window reset by now", forecast({ five_hour: { exhausts_at: at(-10), burn_per_hour: 9, resets_at: at(0) } })],
    ["a malformed instant", forecast({ five_hour: { exhausts_at: "soon", burn_per_hour: 9, resets_at: null } })],
    ["malformed windows", { windows: "five_hour" }],
  ])("shows nothing for %s", (_, value) => {
    expect(forecastLines(value, NOW)).toEqual([]);
  });

  it("keeps a window whose reset is still ahead", () => {
    const lines = forecastLines(forecast({ five_hour: { exhausts_at: at(10), burn_per_hour: 9, resets_at: at(0.5) } }), NOW);
    expect(lines).toHaveLength(1);
  });

  it.each([
    ["five_hour", "5h"],
    ["seven_day", "7d"],
    ["seven_day_opus", "7d Opus"],
    ["brand_new", "brand_new"],
  ])("labels %s as %s", (name, label) => {
    expect(windowLabel(name)).toBe(label);
  });
});

describe("ForecastNote", () => {
  it("shows each window's line with its burn rate as the title", () => {
    wrapper = mount(ForecastNote, {
      props: { forecast: forecast({ five_hour: { exhausts_at: at(130), burn_per_hour: 9.2, resets_at: at(240) } }), now: NOW },
    });
    const note = wrapper.find("[data-testid=forecast]");
    expect(note.text()).toBe("5h runs out in ~2 h 10 min at this rate");
    expect(note.find("[title]").attributes("title")).toBe("9.2 points an hour over the last hour");
  });

  it("renders nothing without a window running out", () => {
    wrapper = mount(ForecastNote, { props: { forecast: null, now: NOW } });
    expect(wrapper.find("[data-testid=forecast]").exists()).toBe(false);
  });
});

describe("SubscriptionsPage with forecasts", () => {
  it("shows the forecast in the row of the subscription that runs out, and nothing in the others", async () => {
    const soon = new Date(Date.now() + (130 * 60 + 30) * 1000).toISOString();
    const headroom = {
      state: "reading", tier: "measured", gate: "usable", status: "ok", fetched_at: new Date().toISOString(), age_seconds: 0,
      windows: { five_hour: { utilization: 70, resets_at: null, status: "allowed" } },
    };
    const row = { headroom, rate_limited_now: false, rate_limited_source: "reading", failures_24h: 0 };
    mockFetch({
      "GET /api/subscriptions": json(200, [
        { id: 1, name: "max-main", provider: "anthropic", plan_type: "max-20x", token_fingerprint: "Ab12", overage: "refuse", agent_count: 0, agents: [] },
        { id: 2, name: "max-idle", provider: "anthropic", plan_type: "max-20x", token_fingerprint: "Cd34", overage: "refuse", agent_count: 0, agents: [] },
      ]),
      "GET /api/agents": json(200, []),
      "GET /api/agents/subscription-pressure": json(200, {
        store: "ok",
        summary: {},
        subscriptions: [
          { id: 1, name: "max-main", ...row, forecast: { computed_at: null, runs_out_at: soon, windows: { five_hour: { exhausts_at: soon, burn_per_hour: 12.5, resets_at: null } } } },
          { id: 2, name: "max-idle", ...row, forecast: null },
        ],
      }),
    });
    wrapper = mount(SubscriptionsPage, { props: { user: ADMIN } });
    await settle();
    const [first, second] = wrapper.findAll("tr[data-subscription]");
    expect(first.find("[data-testid=forecast]").text()).toBe("5h runs out in ~2 h 10 min at this rate");
    expect(second.find("[data-testid=forecast]").exists()).toBe(false);
  });
});
