// The week plan's words for the panel (GET /api/week-plan, an agent's `planned`).
// Instants are shown in UTC, as the explainer's line says them ("Thu 09:00 UTC"),
// so the column and the explainer read alike.

import { formatAge, toMs } from "./format.js";

const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

/** "Thu 09:00" (UTC) for an instant; "" when unknown. */
export function weekInstant(value) {
  const ms = toMs(value);
  if (ms === null) return "";
  const at = new Date(ms);
  const hh = String(at.getUTCHours()).padStart(2, "0");
  const mm = String(at.getUTCMinutes()).padStart(2, "0");
  return `${DAYS[at.getUTCDay()]} ${hh}:${mm}`;
}

/** An agent's planned cell: {label: "max-b until Thu 09:00", title: the because}, or null. */
export function plannedCell(planned) {
  if (!planned) return null;
  return { label: `${planned.where} until ${weekInstant(planned.until)}`, title: planned.because ?? "" };
}

/** "$12.34" for the key's planned spend; "" when unknown. */
export function formatUsd(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "";
  return `$${value.toFixed(2)}`;
}

/** "1.5 M tokens of opus on the key, Sat 12:00 – Sun 12:00" for one spill range. */
export function spillLine(spill) {
  const tokens = spill.tokens >= 1e6 ? `${(spill.tokens / 1e6).toFixed(1)} M` : `${Math.round(spill.tokens / 1e3)} k`;
  const family = spill.family ?? "other models";
  return `${tokens} tokens of ${family} on the key, ${weekInstant(spill.since)} – ${weekInstant(spill.until)}`;
}

/** The summary's head: "Planned 12 min ago: the key takes $3.20 over 7 days" (or why not). */
export function planSummary(plan, now) {
  if (!plan || !plan.made_at) return "No week plan yet: turns follow the placement rules.";
  const age = formatAge(plan.made_at, now);
  const spend = formatUsd(plan.key_usd);
  const head = `Planned ${age}`;
  return spend ? `${head}: the platform key takes ${spend} over the next 7 days` : head;
}
