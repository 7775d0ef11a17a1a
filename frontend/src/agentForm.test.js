import { describe, expect, it } from "vitest";
import { AUTO, NONE, agentForm, agentFormProblems, assignment, changeBody, createBody, plansForRuntime } from "./agentForm.js";

const AGENT = {
  name: "bot",
  owner: "alice",
  runtime: "claude-code",
  model: "",
  subscription: { id: 3, name: "plan-a" },
  routing_policy: "thrifty",
  wait_policy: "wait",
  allowed_tools: ["Read", "Bash"],
  use_platform_api_key: null,
};

describe("createBody", () => {
  it("asks for the best-ranked plan when the subscription is automatic, and leaves the policy to the system", () => {
    const form = { ...agentForm(), name: "bot", allowed_tools: ["Read"] };
    expect(form.subscription).toBe(AUTO);
    expect(createBody(form)).toEqual({
      name: "bot",
      runtime: "claude-code",
      model: "",
      wait_policy: "wait",
      allowed_tools: ["Read"],
      use_platform_api_key: null,
      auto_assign: true,
    });
    expect(assignment(form)).toBeNull();
  });

  it("assigns no plan automatically when one is chosen, and assigns that one after", () => {
    const form = { ...agentForm(), name: "bot", subscription: "7", routing_policy: "pinned", use_platform_api_key: false };
    expect(createBody(form)).toMatchObject({ auto_assign: false, routing_policy: "pinned", use_platform_api_key: false });
    expect(assignment(form)).toEqual({ subscription_id: 7 });
  });

  it("creates without a plan when none is chosen", () => {
    const form = { ...agentForm(), name: "bot", subscription: NONE };
    expect(createBody(form).auto_assign).toBe(false);
    expect(assignment(form)).toBeNull();
  });
});

describe("changeBody", () => {
  it("sends nothing when nothing changed (tool order aside)", () => {
    const form = { ...agentForm(AGENT), allowed_tools: ["Bash", "Read"] };
    expect(changeBody(form, AGENT)).toEqual({});
    expect(assignment(form, AGENT)).toBeNull();
  });

  it("sends only the changed fields", () => {
    const form = { ...agentForm(AGENT), model: " claude-sonnet-4-5 ", wait_policy: "fail", allowed_tools: [], use_platform_api_key: false };
    expect(changeBody(form, AGENT)).toEqual({ model: "claude-sonnet-4-5", wait_policy: "fail", allowed_tools: [], use_platform_api_key: false });
  });

  it("reads an agent that may not use the key as the box unticked, and ticking it follows the system", () => {
    const agent = { ...AGENT, use_platform_api_key: false };
    expect(agentForm(agent).use_platform_api_key).toBe(false);
    expect(changeBody({ ...agentForm(agent), use_platform_api_key: true }, agent)).toEqual({ use_platform_api_key: null });
  });

  it("clears or moves the assignment", () => {
    expect(assignment({ ...agentForm(AGENT), subscription: NONE }, AGENT)).toBe("clear");
    expect(assignment({ ...agentForm(AGENT), subscription: "4" }, AGENT)).toEqual({ subscription_id: 4 });
    const bare = { ...AGENT, subscription: null };
    expect(agentForm(bare).subscription).toBe(NONE);
    expect(assignment(agentForm(bare), bare)).toBeNull();
  });
});

describe("checks and choices", () => {
  it.each([["", true], ["a b", true], ["ok-name_1", false], ["x".repeat(101), true]])("name %j refused: %s", (name, refused) => {
    expect("name" in agentFormProblems({ ...agentForm(), name }, true)).toBe(refused);
  });

  it("does not check the name of an existing agent (it can't change)", () => {
    expect(agentFormProblems(agentForm(AGENT), false)).toEqual({});
  });

  it("offers the plans of the runtime's provider", () => {
    const subs = [
      { id: 1, provider: "anthropic" },
      { id: 2, provider: "openai-codex" },
    ];
    expect(plansForRuntime(subs, "anthropic-api").map((s) => s.id)).toEqual([1]);
    expect(plansForRuntime(subs, "codex-cli").map((s) => s.id)).toEqual([2]);
  });
});
