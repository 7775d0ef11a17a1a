import { afterEach, describe, expect, it } from "vitest";
import { mount } from "@vue/test-utils";
import KeyBudgets from "./KeyBudgets.vue";
import { json, mockFetch, settle } from "../test-utils.js";

let wrapper;
afterEach(() => wrapper?.unmount());

const line = (over) => ({
  scope: "fleet",
  agent: "",
  period: "day",
  starts_on: "2026-12-01",
  reopens_at: "2026-12-02T00:00:00Z",
  budget_usd: null,
  spent_usd: "0.000000",
  reserved_usd: "0.000000",
  remaining_usd: null,
  closed: false,
  ...over,
});

describe("KeyBudgets", () => {
  it("shows each budget's spend, what is left, and a closed one until it reopens", async () => {
    mockFetch({
      "GET /api/budgets": json(200, [
        line({ spent_usd: "1.250000" }),
        line({ scope: "fleet:openai-codex", budget_usd: "10.00", spent_usd: "4.000000", remaining_usd: "6.000000" }),
        line({ scope: "agent:3", agent: "bot", budget_usd: "5.00", spent_usd: "2.000000", remaining_usd: "3.000000" }),
        line({ scope: "agent:3", agent: "bot", period: "month", budget_usd: "2.00", spent_usd: "2.000000", remaining_usd: "0.000000", closed: true, reopens_at: "2027-01-01T00:00:00Z" }),
      ]),
    });
    wrapper = mount(KeyBudgets);
    await settle();
    const cells = (id) => wrapper.find(`[data-testid="${id}"]`).findAll("td").map((td) => td.text());
    expect(cells("budget-fleet-day")).toEqual(["Fleet", "Today", "$1.25", "$0.00", "none", "no cap"]);
    // The OpenAI key's fleet budget is a line of its own, apart from the Anthropic key's.
    expect(cells("budget-fleet:openai-codex-day")).toEqual(["Fleet (OpenAI key)", "Today", "$4.00", "$0.00", "$10.00", "$6.00 left"]);
    expect(cells("budget-agent:3-day")).toEqual(["bot", "Today", "$2.00", "$0.00", "$5.00", "$3.00 left"]);
    const closed = cells("budget-agent:3-month");
    expect(closed.slice(0, 5)).toEqual(["bot", "This month", "$2.00", "$0.00", "$2.00"]);
    expect(closed[5]).toMatch(/^closed until /);
    expect(wrapper.find('[data-testid="budget-agent:3-month"]').classes()).toContain("closed");
  });

  it("names each capped agent's owner for an admin, so two owners' bots read apart", async () => {
    mockFetch({
      "GET /api/budgets": json(200, [
        line({ scope: "agent:3", agent: "bot", owner: "alice", budget_usd: "5.00" }),
        line({ scope: "agent:4", agent: "bot", owner: "bob", budget_usd: "5.00" }),
      ]),
    });
    wrapper = mount(KeyBudgets, { props: { showOwner: true } });
    await settle();
    const whose = (id) => wrapper.find(`[data-testid="${id}"]`).find("td").text();
    expect([whose("budget-agent:3-day"), whose("budget-agent:4-day")]).toEqual(["bot (alice)", "bot (bob)"]);
  });

  it("says when the budgets could not be read, and retries", async () => {
    const { calls } = mockFetch({ "GET /api/budgets": json(500, { detail: "boom" }) });
    wrapper = mount(KeyBudgets);
    await settle();
    expect(wrapper.find("[role=alert]").exists()).toBe(true);
    await wrapper.find("[role=alert] button").trigger("click");
    await settle();
    expect(calls.filter((c) => c.url === "/api/budgets")).toHaveLength(2);
  });
});
