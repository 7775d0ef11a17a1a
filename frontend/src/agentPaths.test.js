import { describe, expect, it } from "vitest";
import { agentKey, agentPath, subscriptionAgentPath } from "./agentPaths.js";

describe("agent paths", () => {
  it("carry the owner, since names are unique per owner only", () => {
    const bot = { name: "bot", owner: "a b" };
    expect(agentPath(bot)).toBe("/api/agents/bot?owner=a%20b");
    expect(agentPath(bot, "/schedules/nightly")).toBe("/api/agents/bot/schedules/nightly?owner=a%20b");
    expect(subscriptionAgentPath(bot)).toBe("/api/subscriptions/agents/bot?owner=a%20b");
    expect(agentPath({ name: "bot" })).toBe("/api/agents/bot");
  });

  it("key two owners' agents of one name apart", () => {
    expect(agentKey({ name: "bot", owner: "alice" })).not.toBe(agentKey({ name: "bot", owner: "bob" }));
  });
});
