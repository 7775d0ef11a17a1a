import { describe, expect, it } from "vitest";
import { openaiKeyProblem, planTokenProblem, platformKeyProblem } from "./tokens.js";

const PLAN = "sk-ant-oat01-" + "a".repeat(40);
const JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";
// What `codex login` writes, on several lines.
const AUTH_JSON = JSON.stringify(
  { OPENAI_API_KEY: null, tokens: { id_token: JWT, access_token: JWT, refresh_token: "rt-1", account_id: "a" } },
  null,
  2,
);

describe("planTokenProblem", () => {
  it.each([
    ["anthropic", PLAN, null],
    ["anthropic", `  ${PLAN}\n`, null],
    ["anthropic", "sk-ant-oat01-short", /starts with 'sk-ant-oat01-'/],
    ["anthropic", "sk-ant-api03-" + "k".repeat(40), /platform API key setting/],
    ["anthropic", "", /required/],
    ["anthropic", "sk-ant-oat01-aaaa bbbbbbbbbbbbbbbbbbbbbbbb", /no spaces/],
    ["openai-codex", JWT, null],
    ["openai-codex", "sk-proj-" + "x".repeat(30), /API key, which bills per token/],
    ["openai-codex", "not.a.jwt", /JWT/],
    ["openai-codex", PLAN, /API key|JWT/],
    ["openai-codex", AUTH_JSON, null],
    ["openai-codex", JSON.stringify(JSON.parse(AUTH_JSON).tokens), null],
    ["openai-codex", "{not json", /not valid JSON/],
    ["openai-codex", JSON.stringify({ tokens: { access_token: JWT } }), /refresh_token is missing/],
    ["openai-codex", JSON.stringify({ tokens: { refresh_token: "r" } }), /access_token is missing/],
  ])("%s %s", (provider, token, expected) => {
    const problem = planTokenProblem(provider, token);
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toMatch(expected);
  });

  it("never repeats the value it rejects", () => {
    const key = "sk-ant-api03-SECRETSECRETSECRETSECRET";
    expect(planTokenProblem("anthropic", key)).not.toContain("SECRET");
  });
});

describe("platformKeyProblem", () => {
  it.each([
    ["sk-ant-api03-" + "k".repeat(40), null],
    [PLAN, /register it as a subscription/],
    ["sk-ant-api03", /starts with 'sk-ant-api'/],
    ["sk-proj-" + "p".repeat(40), /OpenAI platform key/],
    ["", /Paste the key/],
  ])("%s", (key, expected) => {
    const problem = platformKeyProblem(key);
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toMatch(expected);
  });
});

describe("openaiKeyProblem", () => {
  it.each([
    ["sk-proj-" + "p".repeat(40), null],
    ["sk-svcacct-" + "s".repeat(40), null],
    [`  ${"sk-proj-" + "p".repeat(40)}\n`, null],
    ["sk-ant-api03-" + "k".repeat(40), /Anthropic platform API key/],
    [PLAN, /register it as a subscription/],
    [JWT, /ChatGPT\/Codex plan token/],
    ["sk-short", /starts with 'sk-'/],
    ["pk-" + "x".repeat(40), /starts with 'sk-'/],
    ["sk-proj-aaaaaaaaaa bbbbbbbbbbbbbb", /starts with 'sk-'/],
    ["", /Paste the key/],
  ])("%s", (key, expected) => {
    const problem = openaiKeyProblem(key);
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toMatch(expected);
  });

  it("never repeats the value it rejects", () => {
    const key = "sk-ant-api03-SECRETSECRETSECRETSECRET";
    expect(openaiKeyProblem(key)).not.toContain("SECRET");
  });
});
