// Usage reports (GET /api/reports/usage): the date range a chart asks for and what
// it draws and says. Pure functions; `now` is passed in.

const DAY_MS = 86_400_000;

function isoDay(ms) {
  return new Date(ms).toISOString().slice(0, 10);
}

/** The last `days` UTC days up to and including today's, as the API's `from`/`to` dates. */
export function reportRange(days, now) {
  return { from: isoDay(now - (days - 1) * DAY_MS), to: isoDay(now) };
}

/** Chart points {x: ms at the day's UTC midnight, y: USD} from a `group=day` report. */
export function spendSeries(report) {
  return (report?.rows ?? []).map((row) => ({ x: Date.parse(`${row.group}T00:00:00Z`), y: Number(row.key_spend_usd) || 0 }));
}

export function formatUsd(value) {
  const n = Number(value) || 0;
  return `$${n < 1 && n > 0 ? n.toFixed(4) : n.toFixed(2)}`;
}

/** One sentence over the report's totals. */
export function spendSummary(report, days) {
  const t = report?.totals ?? {};
  const turns = t.turns ?? 0;
  return (
    `${formatUsd(t.key_spend_usd)} on the platform API key over the last ${days} days; ` +
    `${turns} turn${turns === 1 ? "" : "s"}, ${t.refusals ?? 0} refusal(s), ${t.switches ?? 0} switch(es).`
  );
}
