// Reading the credential walk into what the panel shows: an execution's attempts
// (GET /api/executions), its subscription_switch, and an agent's last_switch
// (GET /api/agents). A field the server did not send is shown as unknown, never
// guessed.

/** Why a rung was tried (subscriptions/walk.py Why). */
export const WHY_LABELS = {
  assigned: "its assigned subscription",
  pre_dispatch: "routed before dispatch: its subscription was known not to serve",
  ranked: "next best by headroom",
  readmitted: "readmitted on evidence",
  last_resort: "last resort: it had refused within 2 h",
  api_key: "last rung, billed per token",
  concurrent_switch: "the new assignment after a concurrent turn switched",
  legacy: "applied by assignment (legacy agent server)",
};

/** An attempt's or execution's error code in words; the code itself stays visible too. */
export const ERROR_LABELS = {
  rate_limit: "rate limit",
  auth: "credential refused",
  billing: "billing",
  model_unsupported: "model rejected",
  timeout: "timed out",
  container_fault: "container fault",
  runtime_killed: "runtime killed",
  upstream_error: "upstream error",
  worker_lost: "worker lost",
};

/** The execution error codes the API filters on (execution/models.py). */
export const EXECUTION_ERROR_CODES = [
  "billing",
  "auth",
  "model_unsupported",
  "timeout",
  "container_fault",
  "runtime_killed",
  "upstream_error",
  "worker_lost",
];

/**
 * The credential an attempt ran on, by name: "plan-a", "platform API key".
 * `names` maps subscription id -> name for attempts recorded without one.
 */
export function credentialName(attempt, names = new Map()) {
  if (attempt.credential_kind === "api_key") return "platform API key";
  if (attempt.credential_kind === "subscription") {
    return attempt.name || names.get(attempt.subscription_id) || `subscription #${attempt.subscription_id}`;
  }
  return "no credential";
}

/**
 * One attempt as {credential, fingerprint, why, served, outcome, detail}: `outcome`
 * is "served" or "refused"; `detail` is "rate_limit, HTTP 429" for a refusal.
 */
export function readAttempt(attempt, names = new Map()) {
  const served = attempt.outcome === "served";
  const detail = served
    ? ""
    : [attempt.error_code, attempt.status_code ? `HTTP ${attempt.status_code}` : ""].filter(Boolean).join(", ");
  return {
    credential: credentialName(attempt, names),
    fingerprint: attempt.fingerprint || "",
    why: WHY_LABELS[attempt.why] ?? attempt.why ?? "",
    served,
    outcome: served ? "served" : "refused",
    detail,
    legacy: attempt.legacy === true,
    resetsAt: attempt.resets_at ?? null,
  };
}

/** The name of the subscription a switch came from: the trail names it, else `names`. */
export function switchFromName(from, { attempts = [], names = new Map() } = {}) {
  if (from === null || from === undefined) return "no subscription";
  const tried = attempts.find((a) => a.credential_kind === "subscription" && a.subscription_id === from && a.name);
  return tried?.name || names.get(from) || `subscription #${from}`;
}

/**
 * One sentence on why a switch went where it did. The API sends only the structured
 * reason, so this mirrors subscriptions/services.py switch_explanation(), which
 * words the "auto-switched" notification: the two must say the same thing.
 */
export function switchExplanation(why) {
  const reason = why && typeof why === "object" ? why : {};
  const refused = reason.refused || "its subscription refused the turn";
  let where;
  if (reason.tier === "measured") {
    where =
      `it had the most headroom of ${reason.candidate_count} alternative(s) ` +
      `(${reason.seven_day}% of its weekly and ${reason.five_hour}% of its 5-hour limit used)`;
  } else if (reason.readmitted) {
    where = `it was readmitted (${String(reason.readmitted).replaceAll("_", " ")})`;
  } else if (reason.why === "last_resort") {
    where = "it was the last resort (it had refused within the last 2 hours)";
  } else {
    where = "no fresh headroom reading was available for it; it was chosen by load order";
  }
  return `${refused}; the turn was served here because ${where}.`;
}

/**
 * An execution's subscription_switch as {from, to, committed, label, note} or null.
 * A key-served turn "switched" to the key but moved no assignment.
 */
export function readSwitch(execution, names = new Map()) {
  const sw = execution?.subscription_switch;
  if (!sw || typeof sw !== "object") return null;
  const from = switchFromName(sw.from, { attempts: execution.attempts ?? [], names });
  if (sw.kind === "api_key") {
    return {
      from,
      to: "platform API key",
      committed: false,
      label: "Key fallback",
      note: "Billed per token; the assignment is unchanged.",
    };
  }
  const to = sw.to_name || names.get(sw.to) || `subscription #${sw.to}`;
  return {
    from,
    to,
    committed: sw.committed === true,
    label: sw.committed ? "Switched" : "Served elsewhere",
    note: sw.committed
      ? `The agent now runs on ${to}.`
      : "Not committed: another turn had already moved the assignment.",
  };
}

/** True when an agent's last_switch holds a switch (the API sends {} when none). */
export function hasSwitch(lastSwitch) {
  return Boolean(lastSwitch && typeof lastSwitch === "object" && "to" in lastSwitch);
}

/** Why a refused turn's walk stopped (subscriptions/walk.py Stop), in words. */
export const STOP_LABELS = {
  not_a_credential_refusal: "Not a quota or credential refusal, so nothing was switched.",
  no_subscription: "The agent has no subscription, so there was nothing to walk from.",
  auto_switch_off: "Auto-switch is off: the refusal was recorded and nothing switched.",
  pinned: "The agent is pinned to its subscription: a refusal fails the turn instead of switching.",
  exhausted: "Every candidate refused.",
  already_tried: "Every candidate refused.",
  rung_cap: "Every candidate refused (the walk reached its bound).",
  budget: "The turn's time budget ran out before another try; sending it again gets a fresh budget.",
};

/** Subscription id -> name from executions' trails (each attempt names its credential). */
export function trailNames(executions) {
  const names = new Map();
  for (const x of executions ?? []) {
    for (const a of x.attempts ?? []) {
      if (a.credential_kind === "subscription" && a.subscription_id != null && a.name && !names.has(a.subscription_id)) {
        names.set(a.subscription_id, a.name);
      }
    }
  }
  return names;
}
