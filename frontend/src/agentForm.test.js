import { describe, expect, it } from "vitest";
import { AUTO, MAX_PLACEMENT_LABELS, NONE, agentForm, agentFormProblems, assignment, changeBody, createBody, parsePlacement, placementText, plansForRuntime } from "./agentForm.js";

const AGENT = {
  name: "bot",
  owner: "alice",
  runtime: "claude-code",
  model: "",
  subscription: { id: 3, name: "plan-a" },
  routing_policy: "thrifty",
  wait_policy: "wait",
  allowed_tools: ["Read", "Bash"],
  placement: { "trinity.pool": "gpu-less", zone: "eu-1" },
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

describe("placement labels", () => {
  it("shows an agent's labels as sorted name=value lines and reads them back", () => {
    const text = placementText(AGENT.placement);
    expect(text).toBe("trinity.pool=gpu-less\nzone=eu-1");
    expect(parsePlacement(text)).toEqual({ placement: AGENT.placement, problem: null });
    expect(agentForm().placement).toBe("");
    expect(parsePlacement("")).toEqual({ placement: {}, problem: null });
  });

  it("drops blank lines and spaces around a name and its value", () => {
    expect(parsePlacement("\n  trinity.pool = gpu-less \r\n\nzone=A_1\n")).toEqual({ placement: { "trinity.pool": "gpu-less", zone: "A_1" }, problem: null });
  });

  it.each([
    ["trinity.pool=gpu-less", null],
    ["a=b", null],
    [`${"a".repeat(63)}=${"B".repeat(63)}`, null],
    ["a1.b-c_d=X.y-z_9", null],
    ["trinity.pool", /Line 1: write name=value/],
    ["=gpu-less", /Label name "":/],
    ["trinity.pool=", /Label "trinity.pool": the value is 1 to 63/],
    ["Trinity.pool=x", /Label name "Trinity.pool"/],
    [".pool=x", /Label name/],
    ["pool.=x", /Label name/],
    ["trinity pool=x", /Label name/],
    ["pool=gpu==less", /the value/],
    ["pool==gpu", /the value/],
    ["pool=gpu,node.role==manager", /the value/],
    ["pool=gpu less", /the value/],
    ['pool="gpu"', /the value/],
    ["pool='gpu'", /the value/],
    ["pool=-gpu", /the value/],
    ["pool=gpu.", /the value/],
    [`pool=${"x".repeat(64)}`, /the value/],
    [`${"a".repeat(64)}=x`, /Label name/],
    ["pool=g\u00e9pu", /the value/],
    ["pool=a\nb", /Line 2/],
    ["pool=a\npool=b", /"pool" is given twice/],
  ])("%j: %s", (text, refused) => {
    const { placement, problem } = parsePlacement(text);
    if (refused === null) {
      expect(problem).toBeNull();
      expect(Object.keys(placement)).toHaveLength(1);
    } else {
      expect(problem).toMatch(refused);
      expect(placement).toBeNull();
    }
  });

  it("allows the server's cap of labels and refuses one more", () => {
    const lines = (n) => Array.from({ length: n }, (_, i) => `l${i}=v`).join("\n");
    expect(parsePlacement(lines(MAX_PLACEMENT_LABELS)).problem).toBeNull();
    expect(parsePlacement(lines(MAX_PLACEMENT_LABELS + 1)).problem).toBe(`At most ${MAX_PLACEMENT_LABELS} labels (${MAX_PLACEMENT_LABELS + 1} given).`);
  });

  it("names a long or hostile label cut short and escaped, and never the value", () => {
    const secret = "s".repeat(500);
    const { problem } = parsePlacement(`${"k".repeat(500)}=${secret}`);
    expect(problem).toContain(`"${"k".repeat(40)}"…`);
    expect(problem).not.toContain("k".repeat(41));
    expect(parsePlacement("evil\u202egnp=x").problem).toContain('"evil\\u202egnp"');
    expect(parsePlacement("pool=bad value here").problem).not.toContain("bad value");
  });

  it("is the form's placement problem, so nothing is sent", () => {
    expect(agentFormProblems({ ...agentForm(), name: "bot", placement: "pool=a==b" }, true).placement).toMatch(/the value/);
    expect(agentFormProblems({ ...agentForm(AGENT), placement: "zone=eu-2" }, false)).toEqual({});
  });

  it("creates with the labels given, and without the field when there are none", () => {
    expect(createBody({ ...agentForm(), name: "bot", placement: "trinity.pool=gpu-less" }).placement).toEqual({ "trinity.pool": "gpu-less" });
    expect("placement" in createBody({ ...agentForm(), name: "bot", placement: " \n " })).toBe(false);
  });

  it("sends the labels only when they changed, as the whole new set", () => {
    expect(changeBody({ ...agentForm(AGENT), placement: "zone = eu-1\ntrinity.pool=gpu-less" }, AGENT)).toEqual({});
    expect(changeBody({ ...agentForm(AGENT), placement: "zone=eu-2" }, AGENT)).toEqual({ placement: { zone: "eu-2" } });
    expect(changeBody({ ...agentForm(AGENT), placement: "" }, AGENT)).toEqual({ placement: {} });
  });
});
