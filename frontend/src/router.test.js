import { describe, expect, it } from "vitest";
import { consoleHref, pageFromHash, replayHref, routeFromHash, schedulesHref } from "./router.js";

describe("routeFromHash", () => {
  it.each([
    ["", "subscriptions", "subscriptions"],
    ["#/agents", "agents", "agents"],
    ["#/nowhere", "subscriptions", "subscriptions"],
    ["#/agents/bot/console?owner=alice", "console", "agents"],
    ["#/executions/0b7c", "replay", "activity"],
    ["#/schedules?agent=bot", "schedules", "schedules"],
  ])("%j is the %s page, under %s in the nav", (hash, page, section) => {
    expect(routeFromHash(hash)).toMatchObject({ page, section });
    expect(pageFromHash(hash)).toBe(page);
  });

  it("reads the console's agent and owner, and a replay's id", () => {
    expect(routeFromHash("#/agents/my-bot/console?owner=a%40b.c")).toMatchObject({ params: { name: "my-bot" }, query: { owner: "a@b.c" } });
    expect(routeFromHash("#/executions/e-1").params).toEqual({ id: "e-1" });
  });

  it("reads what its own links write", () => {
    const agent = { name: "bot", owner: "a b" };
    expect(routeFromHash(consoleHref(agent))).toMatchObject({ page: "console", params: { name: "bot" }, query: { owner: "a b" } });
    expect(routeFromHash(replayHref("x/y")).params.id).toBe("x/y");
    expect(routeFromHash(schedulesHref(agent)).query).toEqual({ agent: "bot", owner: "a b" });
    expect(consoleHref({ name: "bot" })).toBe("#/agents/bot/console");
  });
});
