// The exhaustion forecast the headroom API sends with each subscription
// (`forecast: {computed_at, runs_out_at, windows: {name: {exhausts_at, burn_per_hour,
// resets_at}}}` or null) -> the lines the panel shows. Only the windows the server
// forecast are shown; nothing is extrapolated here.

import { formatDuration, toMs } from "./format.js";

const LABELS = { five_hour: "5h", seven_day: "7d" };

/** "5h", "7d", "7d Sonnet" for a window name; the name itself when unknown. */
export function windowLabel(name) {
  if (LABELS[name]) return LABELS[name];
  const family = /^seven_day_(.+)$/.exec(name);
  if (family) return `7d ${family[1][0].toUpperCase()}${family[1].slice(1)}`;
  return name;
}

/**
 * [{key, label, text, burn}] soonest first: "runs out in ~2 h 10 min at this rate",
 * "runs out any moment at this rate" once the instant is reached. A window whose
 * reset has come is left out (its quota is back); so is anything malformed.
 */
export function forecastLines(forecast, now) {
  const windows = forecast && typeof forecast === "object" ? forecast.windows : null;
  if (!windows || typeof windows !== "object") return [];
  const lines = [];
  for (const [key, w] of Object.entries(windows)) {
    const at = toMs(w?.exhausts_at);
    if (at === null) continue;
    const resets = toMs(w.resets_at);
    if (resets !== null && resets <= now) continue;
    const left = (at - now) / 1000;
    const text = left >= 60 ? `runs out in ~${formatDuration(left)} at this rate` : "runs out any moment at this rate";
    const burn = typeof w.burn_per_hour === "number" ? w.burn_per_hour : null;
    lines.push({ key, label: windowLabel(key), text, at, burn });
  }
  return lines.sort((a, b) => a.at - b.at);
}
