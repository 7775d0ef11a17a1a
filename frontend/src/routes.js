// An agent's current route: the credential its next turn starts on. This mirrors
// agents/lifecycle.py baseline_rung(): an Anthropic subscription if assigned, else the
// platform key if the key verdict allows it (the server's `platform_key`; without it,
// the system fallback switch is a ceiling the agent's own setting can only narrow,
// false = never) and one is configured, else nothing.

/**
 * `agent` is an /api/agents item. `ctx` = {subscriptionProvider: provider of its
 * subscription or null if unknown, fallbackEnabled, keyConfigured} (null = unknown).
 * Returns {kind: "subscription"|"platform-key"|"none"|"unknown", label, note}.
 */
export function agentRoute(agent, { subscriptionProvider = null, fallbackEnabled = null, keyConfigured = null } = {}) {
  const pinned = agent.routing_policy === "pinned";
  if (agent.subscription && subscriptionProvider !== "openai-codex") {
    return {
      kind: "subscription",
      label: `Subscription ${agent.subscription.name}`,
      note: pinned ? "Pinned: a refusal fails the turn instead of switching." : "",
    };
  }
  const codexNote = agent.subscription
    ? `Its subscription ${agent.subscription.name} is a ChatGPT/Codex plan, which this runtime can't use. `
    : "No subscription assigned. ";
  const verdict = agent.platform_key;
  if (verdict && !verdict.allowed) {
    const why = VERDICT_WHY[verdict.reason] ?? "it may not use the platform API key";
    return { kind: "none", label: "No route", note: `${codexNote}Turns fail: ${why}. Assign a subscription.` };
  }
  const allowed = verdict
    ? true
    : agent.use_platform_api_key === false
      ? false
      : fallbackEnabled;
  if (allowed === null || (allowed && keyConfigured === null)) {
    return { kind: "unknown", label: "Unknown", note: `${codexNote}Whether it may use the platform API key can't be read.` };
  }
  if (allowed && keyConfigured) {
    return { kind: "platform-key", label: "Platform API key", note: `${codexNote}Turns are billed per token.` };
  }
  const why = !allowed
    ? agent.use_platform_api_key === false
      ? "it may not use the platform API key"
      : "the API-key fallback is off"
    : "no platform API key is configured";
  return { kind: "none", label: "No route", note: `${codexNote}Turns fail: ${why}. Assign a subscription.` };
}

// Why the server's key verdict closes the key to an agent (``platform_key.reason``).
const VERDICT_WHY = {
  fallback_off: "the API-key fallback is off",
  no_key: "no platform API key is configured",
  policy: "its subscription-only policy never bills the platform API key",
  agent_opted_out: "it may not use the platform API key",
  not_a_claude_runtime: "its runtime cannot use the platform API key",
};
