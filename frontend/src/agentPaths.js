// An agent's API paths. Names are unique per owner, not across owners: the owner goes
// along (?owner=), so an admin addresses exactly the agent of the row they clicked,
// whoever else uses its name. An operator's own agents carry their own username.

/** `/api/agents/<name><rest>?owner=<owner>` for an /api/agents item (or {name, owner}). */
export function agentPath(agent, rest = "") {
  return withOwner(`/api/agents/${encodeURIComponent(agent.name)}${rest}`, agent);
}

/** Assigning or unassigning the agent's subscription. */
export function subscriptionAgentPath(agent) {
  return withOwner(`/api/subscriptions/agents/${encodeURIComponent(agent.name)}`, agent);
}

/** A key no two agents share (for lists and selects): `<owner>/<name>`. */
export function agentKey(agent) {
  return `${agent.owner ?? ""}/${agent.name}`;
}

/** The agent's name as a person reads it; with `withOwner` (an admin, who sees every
 * owner's agents) its owner too, so two owners' "bot" read apart: `bot (alice)`. */
export function agentLabel(agent, withOwner) {
  return withOwner && agent.owner ? `${agent.name} (${agent.owner})` : agent.name;
}

function withOwner(path, agent) {
  return agent.owner ? `${path}?owner=${encodeURIComponent(agent.owner)}` : path;
}
