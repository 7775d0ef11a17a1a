// An agent's current route: the credential its next turn starts on. This mirrors
// agents/lifecycle.py baseline_credentials(): an Anthropic subscription if assigned,
// else the platform key if the agent may use it (its own switch, or the system
// fallback switch when its own is unset) and one is configured, else nothing.

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
  const allowed = agent.use_platform_api_key === null ? fallbackEnabled : agent.use_platform_api_key;
  if (allowed === null || (allowed && keyConfigured === null)) {
    return { kind: "unknown", label: "Unknown", note: `${codexNote}Whether it may use the platform API key can't be read.` };
  }
  if (allowed && keyConfigured) {
    return { kind: "platform-key", label: "Platform API key", note: `${codexNote}Turns are billed per token.` };
  }
  const why = !allowed
    ? agent.use_platform_api_key === null
      ? "the API-key fallback is off"
      : "it may not use the platform API key"
    : "no platform API key is configured";
  return { kind: "none", label: "No route", note: `${codexNote}Turns fail: ${why}. Assign a subscription.` };
}
