// Time and number formatting. Every function takes `now` (ms) explicitly so tests
// can pin it.

export function toMs(value) {
  if (value === null || value === undefined || value === "") return null;
  const ms = typeof value === "number" ? value : Date.parse(value);
  return Number.isFinite(ms) ? ms : null;
}

/** "45 s", "12 min", "3 h 5 min", "2 d 4 h" for a non-negative number of seconds. */
export function formatDuration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}

/** "resets in 2 h 14 min", "reset time passed" — or null when unknown. */
export function formatReset(resetsAt, now) {
  const at = toMs(resetsAt);
  if (at === null) return null;
  if (at <= now) return "reset time passed";
  return `resets in ${formatDuration((at - now) / 1000)}`;
}

/** "12 min ago" for a past instant; null when unknown. */
export function formatAge(at, now) {
  const ms = toMs(at);
  if (ms === null) return null;
  return `${formatDuration(Math.max(0, now - ms) / 1000)} ago`;
}

export function formatPercent(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return null;
  return `${Number.isInteger(value) ? value : value.toFixed(1)}%`;
}

export function formatDateTime(value) {
  const ms = toMs(value);
  if (ms === null) return "";
  return new Date(ms).toLocaleString(undefined, {
    year: "numeric",
    month: "short",
    day: "numeric",
    hour: "2-digit",
    minute: "2-digit",
  });
}
