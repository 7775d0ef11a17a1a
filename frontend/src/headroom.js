// Reading the headroom API into what the panel shows:
//   GET /api/agents/subscription-pressure      the fleet (one row per subscription)
//   GET /api/subscriptions/{id}/usage          one subscription, failures split by kind
//   GET /api/subscriptions/{id}/headroom/history?window=24h|7d|30d
// A field the server did not send is shown as unknown, never guessed.

import { toMs } from "./format.js";

export const WINDOW_LABELS = { five_hour: "5h", seven_day: "7d" };

function num(value) {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

function readWindow(raw) {
  if (!raw || typeof raw !== "object") return null;
  return { utilization: num(raw.utilization), resetsAt: raw.resets_at ?? null, status: raw.status ?? null };
}

/**
 * A pressure row or a usage body -> {storeState, status, gate, fresh, fetchedAt,
 * ageSeconds, windows, rateLimitedNow, rateLimitedSource, failures, failureTotal}.
 *
 * `fresh` is the server's own verdict (gate "usable"): a reading past its freshness
 * limit, or one whose window has reset, gets no live bars.
 */
export function readUsage(data, now = Date.now()) {
  const headroom = data?.headroom ?? {};
  const rawWindows = headroom.windows ?? {};
  const fetchedAt = headroom.fetched_at ?? null;
  let ageSeconds = num(headroom.age_seconds);
  if (ageSeconds === null && toMs(fetchedAt) !== null) ageSeconds = Math.max(0, Math.round((now - toMs(fetchedAt)) / 1000));
  // The usage endpoint splits failures by kind; the fleet view only counts them.
  const rawFailures = data?.failures_24h;
  let failures = null;
  let failureTotal = null;
  if (typeof rawFailures === "number") {
    failureTotal = rawFailures;
  } else if (rawFailures && typeof rawFailures === "object") {
    failures = Object.entries(rawFailures)
      .filter(([, count]) => typeof count === "number" && count > 0)
      .map(([kind, count]) => ({ kind, count }));
    failureTotal = failures.reduce((sum, f) => sum + f.count, 0);
  }
  return {
    storeState: headroom.state ?? null, // reading | no_reading | unreachable
    status: headroom.status ?? null, // ok | rate_limited | invalid_token | error
    gate: headroom.gate ?? null,
    fresh: headroom.gate === "usable",
    fetchedAt,
    ageSeconds,
    windows: { five_hour: readWindow(rawWindows.five_hour), seven_day: readWindow(rawWindows.seven_day) },
    rateLimitedNow: typeof data?.rate_limited_now === "boolean" ? data.rate_limited_now : null,
    rateLimitedSource: data?.rate_limited_source ?? null,
    failures,
    failureTotal,
  };
}

/** Why a reading gives no live figures, in words (null when it does). */
export const GATE_REASONS = {
  absent: "No reading yet.",
  stale: "The last reading is too old to trust",
  window_reset: "The window the last reading describes has reset since",
  no_answer: "The last probe got no answer from the provider",
  malformed: "The last reading was not in the expected shape",
};

export const FAILURE_KIND_LABELS = {
  rate_limit: "rate limit",
  auth: "credential refused",
  unknown: "unknown kind",
};

export const PROBE_STATUS_LABELS = {
  ok: "Probe OK",
  rate_limited: "Rate limited",
  invalid_token: "Token refused",
  error: "Probe failed",
};

/** "ok" under 75 %, "warn" to 90 %, "danger" above: a cue that the text repeats. */
export function pressureLevel(utilization) {
  if (utilization === null || utilization === undefined) return "unknown";
  if (utilization >= 90) return "danger";
  if (utilization >= 75) return "warn";
  return "ok";
}

/** History body ({samples: [{fetched_at, five_hour, seven_day}]}) -> Chart.js series. */
export function readHistory(body) {
  const samples = Array.isArray(body?.samples) ? body.samples : [];
  const series = { five_hour: [], seven_day: [] };
  for (const sample of samples) {
    const at = toMs(sample.fetched_at);
    if (at === null) continue;
    for (const key of Object.keys(series)) {
      const value = num(sample[key]);
      if (value !== null) series[key].push({ x: at, y: value });
    }
  }
  for (const key of Object.keys(series)) series[key].sort((a, b) => a.x - b.x);
  return series;
}
