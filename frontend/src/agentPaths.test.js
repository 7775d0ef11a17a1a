import { describe, expect, it } from "vitest";
import { agentKey, agentLabel, agentPath, subscriptionAgentPath } from "./agentPaths.js";

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

  it("label an agent with its owner only where owners are shown", () => {
    expect(agentLabel({ name: "bot", owner: "alice" }, true)).toBe("bot (alice)");
    expect(agentLabel({ name: "bot", owner: "alice" }, false)).toBe("bot");
    expect(agentLabel({ name: "bot" }, true)).toBe("bot");
  });
});
