// Routing settings in the panel: what each choice means (shown beside the field),
// and the checks a value passes before it is sent (the server checks them again).

export const POLICIES = [
  {
    value: "thrifty",
    label: "Thrifty: plans first, the API key last",
    help:
      "Turns run on subscriptions first and on the platform API key (billed per token) only when every plan " +
      "refused. A plan without a usable reading is still tried before the key.",
  },
  {
    value: "subscription-only",
    label: "Subscriptions only: never the API key",
    help:
      "Turns run only on plans that refuse past their quota (never ones that bill overage, nor plan types " +
      "nobody curated), and never on the platform API key. When none can serve, the turn fails and says when " +
      "the earliest plan resets.",
  },
  {
    value: "pinned",
    label: "Pinned to its subscription",
    help: "Turns run only on the agent's own subscription; a refusal fails the turn instead of switching.",
  },
];

export const STRATEGIES = [
  {
    value: "banded",
    label: "Banded headroom",
    help: "A walk tries the plan with the most room left first (by 10-point bands, then the fewest agents).",
  },
  {
    value: "balanced",
    label: "Balanced, reset-aware",
    help:
      "A walk weighs each plan's remaining quota against the time left until its window resets, and keeps a " +
      "plan in use unless another is clearly better.",
  },
];

export const WAIT_POLICIES = [
  { value: "wait", label: "Wait for the earliest reset", help: "A scheduled or agent-started turn that every credential refused parks and runs once when the earliest known reset arrives (if it is within the maximum wait)." },
  { value: "fail", label: "Fail at once", help: "A scheduled or agent-started turn that every credential refused fails straight away." },
];

export const MAX_WAIT_HOURS = 7 * 24;

export function choiceLabel(choices, value) {
  return choices.find((c) => c.value === value)?.label ?? value;
}

export function choiceHelp(choices, value) {
  return choices.find((c) => c.value === value)?.help ?? "";
}

/** "" when ``raw`` is a whole number of hours from 0 to 168 (0.25 steps allowed), else why not. */
export function maxWaitProblem(raw) {
  const text = String(raw ?? "").trim();
  if (!/^\d+(\.\d+)?$/.test(text)) return "Enter a number of hours from 0 to 168.";
  const hours = Number(text);
  if (hours > MAX_WAIT_HOURS) return "At most 168 hours (7 days).";
  return "";
}

export function hoursToSeconds(raw) {
  return Math.round(Number(String(raw).trim()) * 3600);
}

export function secondsToHours(seconds) {
  return String(Math.round((seconds / 3600) * 100) / 100);
}

/** "" for an empty budget (no cap) or dollars with at most two decimals, else why not. */
export function usdProblem(raw) {
  const text = String(raw ?? "").trim();
  if (text === "") return "";
  if (!/^\d{1,10}(\.\d{1,2})?$/.test(text)) return "Enter dollars and cents, e.g. 25 or 12.50 (empty: no cap).";
  return "";
}

/** A platform key's two budgets, as the API names them (fleet-wide or per agent). */
export const KEY_BUDGETS = ["key_budget_daily_usd", "key_budget_monthly_usd"];

/** {field: why} for each of `values`' KEY_BUDGETS that usdProblem refuses; {} when both may be sent. */
export function keyBudgetProblems(values) {
  const out = {};
  for (const name of KEY_BUDGETS) {
    const problem = usdProblem(values[name]);
    if (problem) out[name] = problem;
  }
  return out;
}

/** What the API takes for a budget: a decimal string, or null for no cap. */
export function usdValue(raw) {
  const text = String(raw ?? "").trim();
  return text === "" ? null : text;
}

export function usdLabel(value) {
  return value === null || value === undefined ? "no cap" : `$${value}`;
}
