// The agent form's fields and the request bodies they make: POST /api/agents
// (AgentListApi.Input), PATCH /api/agents/{name} (AgentUpdateInput, only what changed)
// and the subscription, which is assigned through PUT/DELETE
// /api/subscriptions/agents/{name} (AgentAssignmentApi). The server validates it all
// again; its field errors are shown beside these fields by name.

/** agents/models.py Runtime, with the provider each one's turns spend (RUNTIME_PROVIDER). */
export const RUNTIMES = [
  { value: "claude-code", label: "Claude Code CLI", provider: "anthropic" },
  { value: "anthropic-api", label: "Anthropic Messages API", provider: "anthropic" },
  { value: "codex-cli", label: "Codex CLI", provider: "openai-codex" },
];

/** agents/models.py CLI_TOOLS: the Claude Code tools a turn may run without approval. */
export const CLI_TOOLS = ["Bash", "Edit", "Glob", "Grep", "LS", "MultiEdit", "NotebookEdit", "Read", "Task", "TodoWrite", "WebFetch", "WebSearch", "Write"];

// The subscription choice besides a plan's id: on create, "auto" lets the server give
// the agent the best-ranked plan of its provider (auto_assign); "none" leaves it without.
export const AUTO = "auto";
export const NONE = "none";

/** The form's fields for a new agent (null) or an existing one. */
export function agentForm(agent = null) {
  return {
    name: agent?.name ?? "",
    runtime: agent?.runtime ?? "claude-code",
    model: agent?.model ?? "",
    subscription: agent ? (agent.subscription ? String(agent.subscription.id) : NONE) : AUTO,
    routing_policy: agent?.routing_policy ?? "", // "": the system default (create only)
    wait_policy: agent?.wait_policy ?? "wait",
    allowed_tools: [...(agent?.allowed_tools ?? [])],
    // Off: never bill the platform key (false); on: follow the system's fallback (null).
    use_platform_api_key: agent ? agent.use_platform_api_key !== false : true,
  };
}

/** The subscriptions an agent of `runtime` can run on (its provider's plans). */
export function plansForRuntime(subscriptions, runtime) {
  const provider = RUNTIMES.find((r) => r.value === runtime)?.provider;
  return subscriptions.filter((s) => s.provider === provider);
}

/** {field: message} for what the server would refuse anyway; {} when none. */
export function agentFormProblems(form, creating) {
  const out = {};
  if (creating && !/^[-a-zA-Z0-9_]{1,100}$/.test(form.name)) out.name = "Letters, digits, - and _ only (1 to 100).";
  if (form.model.length > 100) out.model = "At most 100 characters.";
  return out;
}

/** POST /api/agents. A chosen plan is assigned after the create (assignmentAfterCreate). */
export function createBody(form) {
  const body = {
    name: form.name,
    runtime: form.runtime,
    model: form.model.trim(),
    wait_policy: form.wait_policy,
    allowed_tools: [...form.allowed_tools],
    use_platform_api_key: form.use_platform_api_key ? null : false,
    auto_assign: form.subscription === AUTO,
  };
  if (form.routing_policy) body.routing_policy = form.routing_policy;
  return body;
}

/** PATCH /api/agents/{name}: the fields that differ from `agent`. */
export function changeBody(form, agent) {
  const before = agentForm(agent);
  const body = {};
  for (const field of ["runtime", "routing_policy", "wait_policy"]) {
    if (form[field] !== before[field]) body[field] = form[field];
  }
  if (form.model.trim() !== before.model) body.model = form.model.trim();
  if (sorted(form.allowed_tools) !== sorted(before.allowed_tools)) body.allowed_tools = [...form.allowed_tools];
  if (form.use_platform_api_key !== before.use_platform_api_key) body.use_platform_api_key = form.use_platform_api_key ? null : false;
  return body;
}

const sorted = (list) => [...list].sort().join(",");

/**
 * The assignment to make after saving: {subscription_id} to assign a plan, "clear" to
 * unassign, null to leave it. `agent` is null when the agent was just created.
 */
export function assignment(form, agent = null) {
  if (form.subscription === AUTO) return null;
  if (form.subscription === NONE) return agent?.subscription ? "clear" : null;
  const id = Number(form.subscription);
  return agent?.subscription?.id === id ? null : { subscription_id: id };
}
