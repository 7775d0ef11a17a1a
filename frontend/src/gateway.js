import { formatDuration } from "./format.js";

// The Gateway page's logic, apart from its template so it is tested as plain functions:
// a key's form and the request bodies it makes, its limits in words, and the usage
// figures as the page shows them. The server validates and decides (who may raise a
// limit included); these only catch typing mistakes early and send what changed.

// A key's limits, in the order the page shows them; `usd` ones are dollar strings.
export const LIMITS = [
  { field: "requests_per_minute", label: "Requests per minute", short: "/min" },
  { field: "max_streams", label: "Open requests at once", short: "open at once" },
  { field: "daily_tokens", label: "Tokens per day (UTC)", short: "tokens/day" },
  { field: "monthly_tokens", label: "Tokens per month (UTC)", short: "tokens/month" },
  { field: "daily_usd", label: "List-price dollars per day", short: "/day", usd: true },
  { field: "monthly_usd", label: "List-price dollars per month", short: "/month", usd: true },
];

export const STATUS_CHIPS = { active: "ok", expired: "warn", revoked: "neutral" };
export const STATUS_LABELS = { active: "Active", expired: "Expired", revoked: "Revoked" };

const NAME = /^[\p{L}\p{N}_][\p{L}\p{N}_ .@+-]*$/u;
const WHOLE = /^[1-9][0-9]*$/;
const DOLLARS = /^(0|[1-9][0-9]{0,7})(\.[0-9]{1,4})?$/;
const USERNAME = /^[\w.@+-]+$/;

/** "2026-12-31T23:59" (a datetime-local input's value, local time) for an ISO instant. */
export function toLocalInput(iso) {
  if (!iso) return "";
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return "";
  const pad = (n) => String(n).padStart(2, "0");
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${pad(at.getMinutes())}`;
}

/** The ISO instant (UTC, with its offset) of a datetime-local value; null when empty. */
export function fromLocalInput(value) {
  if (!value) return null;
  const at = new Date(value);
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString();
}

/** A form for a new key (`key` null) or one to change `key`'s. Limits are strings. */
export function keyForm(key = null) {
  const limits = {};
  for (const { field } of LIMITS) limits[field] = key?.[field] == null ? "" : String(key[field]);
  return {
    name: key?.name ?? "",
    owner: "",
    expires: toLocalInput(key?.expires_at),
    providers: [...(key?.providers ?? [])],
    model_families: [...(key?.model_families ?? [])],
    limits,
  };
}

/** What is wrong with `form` ({field: message}); `now` in ms. */
export function keyFormProblems(form, now) {
  const out = {};
  const name = form.name.trim();
  if (!name) out.name = "A name is required.";
  else if (!NAME.test(name)) out.name = "Use letters, digits, spaces and . @ + - _ only.";
  if (form.owner && !USERNAME.test(form.owner.trim())) out.owner = "Not a username.";
  if (form.expires) {
    const at = fromLocalInput(form.expires);
    if (!at) out.expires_at = "Not a date and time.";
    else if (Date.parse(at) <= now) out.expires_at = "The expiry must be in the future.";
  }
  for (const { field, usd } of LIMITS) {
    const raw = form.limits[field].trim();
    if (!raw) continue;
    if (usd ? !DOLLARS.test(raw) || Number(raw) <= 0 : !WHOLE.test(raw)) {
      out[field] = usd ? "Dollars above 0, at most 4 decimals (e.g. 2.50)." : "A whole number above 0.";
    }
  }
  return out;
}

function limitValue(raw, usd) {
  const text = raw.trim();
  if (!text) return null;
  return usd ? text : Number(text);
}

/** The POST body for `form`: only what was given (an empty limit is no limit). */
export function createBody(form) {
  const body = { name: form.name.trim() };
  if (form.owner.trim()) body.owner = form.owner.trim();
  if (form.expires) body.expires_at = fromLocalInput(form.expires);
  if (form.providers.length) body.providers = [...form.providers];
  if (form.model_families.length) body.model_families = [...form.model_families];
  for (const { field, usd } of LIMITS) {
    const value = limitValue(form.limits[field], usd);
    if (value !== null) body[field] = value;
  }
  return body;
}

const sameSet = (a, b) => a.length === b.length && a.every((x) => b.includes(x));
const sameLimit = (a, b, usd) => (a === null || b === null ? a === b : usd ? Number(a) === Number(b) : a === b);

/** The PATCH body for `form` against `key`: only the fields that changed (an emptied
 * limit is null: it clears the limit). Empty when nothing changed. */
export function changeBody(form, key) {
  const body = {};
  if (form.name.trim() !== key.name) body.name = form.name.trim();
  const expires = fromLocalInput(form.expires);
  if (expires !== fromLocalInput(toLocalInput(key.expires_at))) body.expires_at = expires;
  for (const field of ["providers", "model_families"]) {
    if (!sameSet(form[field], key[field] ?? [])) body[field] = [...form[field]];
  }
  for (const { field, usd } of LIMITS) {
    const value = limitValue(form.limits[field], usd);
    if (!sameLimit(value, key[field] ?? null, usd)) body[field] = value;
  }
  return body;
}

/** "12,345" for a count. */
export function formatCount(n) {
  return Number(n ?? 0).toLocaleString("en-US");
}

/** "$1.23" for a dollar string; "$0.0012" keeps what cents would round away. */
export function formatUsd(value) {
  const n = Number(value ?? 0);
  if (n !== 0 && Math.abs(n) < 0.01) return `$${n.toFixed(4)}`;
  return `$${n.toFixed(2)}`;
}

/** A key's limits in words: ["60/min", "100,000 tokens/day", "$5.00/day"]; [] for none. */
export function limitWords(key) {
  const words = [];
  for (const { field, short, usd } of LIMITS) {
    const value = key[field];
    if (value == null) continue;
    words.push(usd ? `${formatUsd(value)}${short}` : `${formatCount(value)}${short.startsWith("/") ? "" : " "}${short}`);
  }
  return words;
}

/** What a key may reach, in words. */
export function reachWords(key) {
  const providers = key.providers?.length ? key.providers.join(", ") : "every provider";
  const families = key.model_families?.length ? key.model_families.join(", ") : "every model";
  return `${providers}; ${families}`;
}

/** A model group's tokens in words: "300 in · 50 out · 1,000 cache read · 50 cache write". */
export function tokenWords(group) {
  const parts = [`${formatCount(group.input_tokens)} in`, `${formatCount(group.output_tokens)} out`];
  if (group.cache_read_tokens) parts.push(`${formatCount(group.cache_read_tokens)} cache read`);
  if (group.cache_write_tokens) parts.push(`${formatCount(group.cache_write_tokens)} cache write`);
  return parts.join(" · ");
}

const KIND_WORDS = { subscription: "plan", api_key: "platform key" };

/** Who served a group: "max-a (plan)"; "not served" for refused requests. */
export function servedByWords(group) {
  if (!group.kind && !group.name) return "not served";
  const kind = KIND_WORDS[group.kind] ?? group.kind;
  return group.name ? `${group.name} (${kind})` : kind;
}

/** The usage window for "the last `days` days" ending `now` (ms): query parameters. */
export function usageWindow(days, now) {
  return { since: new Date(now - days * 86_400_000).toISOString(), until: new Date(now).toISOString() };
}

/** "3 min" since a stream started; "" when its instant can't be read. */
export function streamAge(stream, now) {
  const started = Date.parse(stream.started_at);
  return Number.isFinite(started) ? formatDuration(Math.max(0, now - started) / 1000) : "";
}
