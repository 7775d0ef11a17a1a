import { afterEach, describe, expect, it, vi } from "vitest";
import { mount } from "@vue/test-utils";
import SchedulesPage from "./SchedulesPage.vue";
import ActivityPage from "./ActivityPage.vue";
import { ADMIN, json, mockFetch, OPERATOR, page, settle } from "../test-utils.js";

vi.mock("chart.js", () => {
  class Chart {
    static register() {}
    destroy() {}
  }
  return { Chart, Filler: {}, Legend: {}, LinearScale: {}, LineController: {}, LineElement: {}, PointElement: {}, Tooltip: {} };
});

let wrapper;
afterEach(() => wrapper?.unmount());

const NIGHTLY = {
  id: 1, agent: "bot", name: "nightly", cron: "0 3 * * *", message: "tidy up", model: "", enabled: true,
  next_fire_at: "2026-06-02T03:00:00Z", last_fired_at: null, created_at: "2026-06-01T12:00:00Z", updated_at: "2026-06-01T12:00:00Z",
};
const U = "/api/agents/bot/schedules";

function routes(extra = {}) {
  return { "GET /api/agents": json(200, [{ name: "bot" }]), [`GET ${U}`]: json(200, [NIGHTLY]), ...extra };
}

describe("SchedulesPage", () => {
  it("lists each agent's schedules with the cron, next run and enabled switch", async () => {
    mockFetch(routes());
    wrapper = mount(SchedulesPage, { props: { user: OPERATOR } });
    await settle();
    const row = wrapper.find("tr[data-schedule='bot/nightly']");
    expect(row.text()).toContain("0 3 * * *");
    expect(row.text()).toContain("tidy up");
    expect(row.text()).toContain("Not yet");
    expect(row.find("input[role=switch]").element.checked).toBe(true);
  });

  it("labels an admin's two owners' bots with their owners and edits each on its own path", async () => {
    const bots = [{ name: "bot", owner: "alice" }, { name: "bot", owner: "bob" }];
    const { calls } = mockFetch({
      "GET /api/agents": json(200, bots),
      [`GET ${U}?owner=alice`]: json(200, [NIGHTLY]),
      [`GET ${U}?owner=bob`]: json(200, [{ ...NIGHTLY, id: 2 }]),
      [`PATCH ${U}/nightly?owner=bob`]: json(200, { ...NIGHTLY, id: 2, enabled: false }),
    });
    wrapper = mount(SchedulesPage, { props: { user: ADMIN } });
    await settle();
    const rows = wrapper.findAll("tr[data-schedule='bot/nightly']");
    expect(rows.map((r) => r.find("td[data-label=Agent]").text())).toEqual(["bot (alice)", "bot (bob)"]);
    expect(wrapper.findAll("#schedule-agent option").map((o) => o.text())).toEqual(["bot (alice)", "bot (bob)"]);
    await rows[1].find("input[role=switch]").setValue(false);
    await settle();
    expect(calls.at(-1)).toEqual(expect.objectContaining({ method: "PATCH", url: `${U}/nightly?owner=bob` }));
  });

  it("says when there is nothing scheduled", async () => {
    mockFetch(routes({ [`GET ${U}`]: json(200, []) }));
    wrapper = mount(SchedulesPage, { props: { user: OPERATOR } });
    await settle();
    expect(wrapper.find("[data-testid=no-schedules]").text()).toContain("Add one below.");
  });

  it("creates a schedule through the API and reloads the list", async () => {
    let created = false;
    const { calls } = mockFetch(
      routes({
        [`GET ${U}`]: () => json(200, created ? [NIGHTLY] : []),
        [`POST ${U}`]: () => {
          created = true;
          return json(201, NIGHTLY);
        },
      })
    );
    wrapper = mount(SchedulesPage, { props: { user: OPERATOR } });
    await settle();
    await wrapper.find("#schedule-name").setValue("nightly");
    await wrapper.find("#schedule-cron").setValue("0 3 * * *");
    await wrapper.find("#schedule-message").setValue("tidy up");
    await wrapper.find("form").trigger("submit");
    await settle();
    expect(calls.find((c) => c.method === "POST")).toMatchObject({
      url: U,
      body: { name: "nightly", cron: "0 3 * * *", message: "tidy up", model: "", enabled: true },
    });
    expect(wrapper.find("tr[data-schedule='bot/nightly']").exists()).toBe(true);
  });

  it("refuses a cron without five fields before sending it", async () => {
    const { calls } = mockFetch(routes());
    wrapper = mount(SchedulesPage, { props: { user: OPERATOR } });
    await settle();
    await wrapper.find("#schedule-name").setValue("x");
    await wrapper.find("#schedule-cron").setValue("* * * *");
    await wrapper.find("#schedule-message").setValue("m");
    await wrapper.find("form").trigger("submit");
    await settle();
    expect(wrapper.find("#schedule-cron-error").text()).toContain("Five fields");
    expect(calls.some((c) => c.method === "POST")).toBe(false);
  });

  it("shows the server's reason for a bad expression beside the field", async () => {
    mockFetch(routes({ [`POST ${U}`]: json(400, { cron: ["'0 0 30 2 *' never fires."] }) }));
    wrapper = mount(SchedulesPage, { props: { user: OPERATOR } });
    await settle();
    await wrapper.find("#schedule-name").setValue("feb");
    await wrapper.find("#schedule-cron").setValue("0 0 30 2 *");
    await wrapper.find("#schedule-message").setValue("m");
    await wrapper.find("form").trigger("submit");
    await settle();
    expect(wrapper.find("#schedule-cron-error").text()).toBe("'0 0 30 2 *' never fires.");
  });

  it("edits, disables and deletes a schedule through the API", async () => {
    const { calls } = mockFetch(
      routes({
        [`PATCH ${U}/nightly`]: (call) => json(200, { ...NIGHTLY, ...call.body, next_fire_at: call.body.enabled === false ? null : NIGHTLY.next_fire_at }),
        [`DELETE ${U}/nightly`]: { status: 204, body: null },
      })
    );
    wrapper = mount(SchedulesPage, { props: { user: OPERATOR } });
    await settle();
    await wrapper.find("tr[data-schedule='bot/nightly'] input[role=switch]").setValue(false);
    await settle();
    expect(calls.at(-1)).toMatchObject({ method: "PATCH", url: `${U}/nightly`, body: { enabled: false } });
    expect(wrapper.find("[data-testid=next-fire]").text()).toBe("Never (disabled)");

    await wrapper.findAll("button").find((b) => b.text() === "Edit").trigger("click");
    expect(wrapper.find("#schedule-form-heading").text()).toBe("Edit bot / nightly");
    await wrapper.find("#schedule-cron").setValue("0 4 * * *");
    await wrapper.find("form").trigger("submit");
    await settle();
    expect(calls.find((c) => c.method === "PATCH" && c.body.cron)).toMatchObject({ url: `${U}/nightly`, body: { cron: "0 4 * * *" } });

    await wrapper.findAll("button").find((b) => b.text() === "Delete").trigger("click");
    await settle();
    expect(calls.at(-1)).toMatchObject({ method: "DELETE", url: `${U}/nightly` });
  });
});

describe("ActivityPage and parked turns", () => {
  it("shows a parked turn's instant and that it waits for a reset", async () => {
    mockFetch({
      "GET /api/agents": json(200, []),
      "GET /api/subscriptions": json(200, []),
      "GET /api/notifications": json(200, page([])),
      "GET /api/executions": json(200, page([
        {
          id: "p1", agent_name: "bot", trigger: "schedule", status: "parked", error_code: "", walk_stop: "exhausted",
          error_detail: "Tried: plan-a (rate limit); every candidate refused.", parked_until: "2026-06-01T17:00:00Z",
          earliest_reset: "2026-06-01T17:00:00Z", served_by_kind: "", served_by_subscription: null, subscription_switch: null,
          input_tokens: 0, output_tokens: 0, created_at: "2026-06-01T12:00:00Z", attempts: [],
        },
      ])),
    });
    wrapper = mount(ActivityPage);
    await settle();
    const row = wrapper.find("tr[data-execution=p1]");
    expect(row.find("[data-testid=parked-until]").text()).toMatch(/^Runs again at .*2026/);
    expect(row.text()).toContain("Waiting for a reset");
  });
});
