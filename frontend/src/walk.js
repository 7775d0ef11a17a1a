// Reading the credential walk into what the panel shows: an execution's attempts
// (GET /api/executions), its subscription_switch, and an agent's last_switch
// (GET /api/agents). A field the server did not send is shown as unknown, never
// guessed. The label tables are Python's (trinity/panel_tables.py), written into
// generated/tables.json by `manage.py panel_tables`.
import tables from "./generated/tables.json";

/** Why a rung was tried (routing/walk.py Why), in words (routing/walk_labels.py). */
export const WHY_LABELS = tables.why_labels;

/** An attempt's or execution's error code in words; the code itself stays visible too. */
export const ERROR_LABELS = tables.error_labels;

/** The execution error codes the API filters on (execution/api.py ERROR_HTTP_STATUS). */
export const EXECUTION_ERROR_CODES = tables.execution_error_codes;

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

/**
 * Where a switch (an execution's subscription_switch or an agent's last_switch) came
 * from, by the name the API sent. A switch recorded before the API sent `from_name`
 * is shown by its id: the panel does not go looking for the name elsewhere.
 */
export function switchFrom(sw) {
  if (sw?.from_name) return sw.from_name;
  if (sw?.from === null || sw?.from === undefined) return "no subscription";
  return `subscription #${sw.from}`;
}

/** Where a subscription switch went, by the name the API sent, else its id. */
export function switchTo(sw) {
  return sw?.to_name || `subscription #${sw?.to}`;
}

/**
 * Why a switch went where it did: the sentence the API sends (`explanation`, the one
 * subscriptions/services.py switch_explanation() also puts in the switch
 * notification). A switch recorded before the API sent it shows what refused.
 */
export function switchReason(sw) {
  return sw?.explanation || (sw?.why && typeof sw.why === "object" ? sw.why.refused || "" : "");
}

/**
 * An execution's subscription_switch as {from, to, committed, label, note, reason}
 * or null. A key-served turn "switched" to the key but moved no assignment; its
 * note says why it ran there, so it carries no reason sentence.
 */
export function readSwitch(execution) {
  const sw = execution?.subscription_switch;
  if (!sw || typeof sw !== "object") return null;
  const from = switchFrom(sw);
  if (sw.kind === "api_key") {
    return {
      from,
      to: "platform API key",
      committed: false,
      label: "Key fallback",
      note: "Billed per token; the assignment is unchanged.",
      reason: "",
    };
  }
  const to = switchTo(sw);
  // A throttle (a 429 without quota evidence) walks the turn but moves no assignment.
  const throttled = sw.committed !== true && sw.why && typeof sw.why === "object" && sw.why.throttled === true;
  let note = sw.committed ? `The agent now runs on ${to}.` : "Not committed: another turn had already moved the assignment.";
  if (throttled) note = `Not committed: ${from || "its plan"} was throttled, backed off a minute; the agent stays on it.`;
  return {
    from,
    to,
    committed: sw.committed === true,
    label: sw.committed ? "Switched" : throttled ? "Served elsewhere (throttle)" : "Served elsewhere",
    note,
    reason: switchReason(sw),
  };
}

/** True when an agent's last_switch holds a switch (the API sends {} when none). */
export function hasSwitch(lastSwitch) {
  return Boolean(lastSwitch && typeof lastSwitch === "object" && "to" in lastSwitch);
}

/** Why a refused turn's walk stopped (routing/walk.py Stop), in words (routing/walk_labels.py). */
export const STOP_LABELS = tables.stop_labels;
