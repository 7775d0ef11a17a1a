// The audit log (GET /api/audit): how one entry reads in the panel.

/** Who made the change: the username, how they came (token, key) or the system. */
export function actorLabel(entry) {
  if (entry.actor_kind === "system") return "System";
  if (entry.actor_kind === "anonymous") return entry.actor_username ? `${entry.actor_username} (not signed in)` : "Not signed in";
  const via = entry.actor_kind === "api_token" ? " via API token" : entry.actor_kind === "gateway_key" ? " via gateway key" : "";
  const token = entry.actor_token ? ` ${entry.actor_token}` : "";
  return `${entry.actor_username || "deleted user"}${via}${token}`;
}

/** The object an entry is about: its type and label (else its id). */
export function objectLabel(entry) {
  const name = entry.object_label || entry.object_id;
  return name ? `${entry.object_type} ${name}` : entry.object_type;
}

function shown(value) {
  if (value === null || value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** `{field: [before, after]}` as rows of {field, before, after} text. */
export function changeRows(changes) {
  return Object.entries(changes ?? {}).map(([field, [before, after]]) => ({
    field,
    before: shown(before),
    after: shown(after),
  }));
}

/** The export's URL for the same filters (JSON lines). */
export function exportUrl(params) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v));
  const text = query.toString();
  return text ? `/api/audit/export?${text}` : "/api/audit/export";
}
