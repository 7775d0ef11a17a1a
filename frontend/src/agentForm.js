// The agent form's fields and the request bodies they make: POST /api/agents
// (AgentListApi.Input), PATCH /api/agents/{name} (AgentUpdateInput, only what changed)
// and the subscription, which is assigned through PUT/DELETE
// /api/subscriptions/agents/{name} (AgentAssignmentApi). The server validates it all
// again; its field errors are shown beside these fields by name.
import tables from "./generated/tables.json";

/** agents/models.py Runtime, with the provider each one's turns spend (RUNTIME_PROVIDER). */
export const RUNTIMES = [
  { value: "claude-code", label: "Claude Code CLI", provider: "anthropic" },
  { value: "anthropic-api", label: "Anthropic Messages API", provider: "anthropic" },
  { value: "codex-cli", label: "Codex CLI", provider: "openai-codex" },
];

/** agents/models.py CLI_TOOLS: the Claude Code tools a turn may run without approval. */
export const CLI_TOOLS = ["Bash", "Edit", "Glob", "Grep", "LS", "MultiEdit", "NotebookEdit", "Read", "Task", "TodoWrite", "WebFetch", "WebSearch", "Write"];

// An agent's placement labels: the server's shapes (trinity/node_labels.py, written into
// generated/tables.json by `manage.py panel_tables`), so the browser refuses exactly
// what the server would. Messages name the label (cut short), never its value.
const NODE_LABELS = tables.node_labels;
export const MAX_PLACEMENT_LABELS = NODE_LABELS.max_labels;
const LABEL_NAME = new RegExp(`^(?:${NODE_LABELS.name_pattern})$`);
const LABEL_VALUE = new RegExp(`^(?:${NODE_LABELS.value_pattern})$`);
const NAME_RULE = "1 to 63 lower-case letters, digits, '.', '-' or '_', starting and ending with a letter or digit";
const VALUE_RULE = "1 to 63 letters, digits, '.', '-' or '_', starting and ending with a letter or digit";

// A label name as a message quotes it: at most `shown` characters, anything but
// printable ASCII escaped (a bidi override or a control character is shown as a code).
function shownName(name) {
  const cut = name.length > NODE_LABELS.shown ? name.slice(0, NODE_LABELS.shown) : name;
  const quoted = JSON.stringify(cut).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  return cut === name ? quoted : `${quoted}…`;
}

function labelProblem(name, value) {
  if (!LABEL_NAME.test(name)) return `Label name ${shownName(name)}: ${NAME_RULE}.`;
  if (!LABEL_VALUE.test(value)) return `Label ${shownName(name)}: the value is ${VALUE_RULE}.`;
  return null;
}

/** An agent's placement as the form's text: one `name=value` line per label, by name. */
export function placementText(placement) {
  const labels = placement ?? {};
  return Object.keys(labels)
    .sort()
    .map((name) => `${name}=${labels[name]}`)
    .join("\n");
}

/**
 * The form's placement text read as labels: {placement, problem}. Each non-blank line is
 * `name=value` (split at its first "=", spaces around either part dropped); `problem` is
 * the first thing the server would refuse, with `placement` null.
 */
export function parsePlacement(text) {
  const placement = {};
  const lines = (text ?? "").split(/\r?\n/);
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (!line) continue;
    const at = line.indexOf("=");
    if (at < 0) return { placement: null, problem: `Line ${index + 1}: write name=value, e.g. trinity.pool=gpu-less.` };
    const name = line.slice(0, at).trim();
    const value = line.slice(at + 1).trim();
    const problem = labelProblem(name, value) ?? (Object.hasOwn(placement, name) ? `Label ${shownName(name)} is given twice.` : null);
    if (problem) return { placement: null, problem };
    placement[name] = value;
  }
  const count = Object.keys(placement).length;
  if (count > MAX_PLACEMENT_LABELS) return { placement: null, problem: `At most ${MAX_PLACEMENT_LABELS} labels (${count} given).` };
  return { placement, problem: null };
}

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
    placement: placementText(agent?.placement), // lines of name=value
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
  const { problem } = parsePlacement(form.placement);
  if (problem) out.placement = problem;
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
  // None given: the server's default (anywhere); the form was checked before sending.
  const { placement } = parsePlacement(form.placement);
  if (placement && Object.keys(placement).length) body.placement = placement;
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
  // Compared as sorted lines: reordering or re-spacing the labels is no change.
  const { placement } = parsePlacement(form.placement);
  if (placement && placementText(placement) !== before.placement) body.placement = placement;
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
