// One turn's live events (GET /api/executions/{id}/events, or the stream a
// `stream: true` task or chat answers) reduced to what the console shows: a timeline
// of the walk (sent on X, refused by X, walking to Y, served, committed) and the
// tools, the reply's text as it arrives, and the final status. Pure: every function
// takes a state and returns a new one.
import { ERROR_LABELS, WHY_LABELS } from "./walk.js";

/** The state before any event: `status` is "starting" until the `turn` event. */
export function emptyTurn() {
  return {
    executionId: null,
    agent: null,
    owner: null,
    sessionId: null,
    message: "",
    lastSeq: 0,
    items: [], // the timeline, in order
    texts: [], // [{attempt, text}] the reply's text per attempt
    status: "starting", // starting | running | parked | succeeded | failed | cancelled
    parkedUntil: null,
    end: null,
  };
}

/** An SSE event ({id, event, data}) as {seq, kind, data}; null when its data is not a JSON object. */
export function parseTurnEvent(sse) {
  let data;
  try {
    data = JSON.parse(sse.data);
  } catch {
    return null;
  }
  if (!data || typeof data !== "object" || Array.isArray(data)) return null;
  const seq = Number.parseInt(sse.id, 10);
  return { seq: Number.isFinite(seq) ? seq : null, kind: sse.event, data };
}

/** A credential ({kind, name}) by name: "plan-a", "platform API key", "no credential". */
export function credentialLabel(ref) {
  if (!ref || typeof ref !== "object") return "an unknown credential";
  if (ref.kind === "api_key") return "platform API key";
  if (ref.kind === "subscription") return ref.name || "a subscription";
  return "no credential";
}

/** True once the turn ended (or parked): nothing more will stream. */
export function isOver(turn) {
  return turn.end !== null || turn.status === "parked";
}

/** The reply as shown: the text streamed so far, else the final response. */
export function replyText(turn) {
  const streamed = turn.texts.map((t) => t.text).join("");
  return streamed || turn.end?.response || "";
}

/** The turn with its execution id (from the POST's X-Execution-Id header). */
export function withExecutionId(turn, executionId) {
  return executionId && !turn.executionId ? { ...turn, executionId } : turn;
}

/**
 * Apply one event ({seq, kind, data}). An event at or below the last seq already
 * applied is a resume's overlap and is ignored; an unknown kind only moves the seq.
 */
export function applyEvent(turn, event) {
  if (event.seq !== null && event.seq <= turn.lastSeq) return turn;
  const next = { ...turn, lastSeq: event.seq ?? turn.lastSeq };
  const apply = REDUCERS[event.kind];
  return apply ? apply(next, event.data ?? {}, event.seq) : next;
}

function addItem(turn, item, seq) {
  return { ...turn, items: [...turn.items, { key: seq ?? turn.items.length, ...item }] };
}

function addText(turn, data) {
  const attempt = data.attempt ?? 0;
  const texts = [...turn.texts];
  const last = texts[texts.length - 1];
  if (last && last.attempt === attempt) texts[texts.length - 1] = { attempt, text: last.text + (data.text ?? "") };
  else texts.push({ attempt, text: data.text ?? "" });
  return { ...turn, texts };
}

function addToolResult(turn, data, seq) {
  const result = { ok: data.ok === true, output: data.output ?? "" };
  const index = turn.items.findIndex((i) => i.kind === "tool" && i.id === data.id && i.attempt === (data.attempt ?? 0) && !i.result);
  if (index === -1) {
    return addItem(turn, { kind: "tool", attempt: data.attempt ?? 0, id: data.id, name: "", input: "", result }, seq);
  }
  const items = [...turn.items];
  items[index] = { ...items[index], result };
  return { ...turn, items };
}

// The walk moved on: the refused attempt's text is superseded (the contract's rule).
function walk(turn, data, seq) {
  const attempt = data.attempt ?? 0;
  const cleared = turn.texts.some((t) => t.attempt === attempt && t.text);
  const texts = turn.texts.filter((t) => t.attempt !== attempt);
  const item = { kind: "walking", attempt, to: credentialLabel(data.to), why: why(data.why), clearedText: cleared };
  return addItem({ ...turn, texts }, item, seq);
}

function finish(turn, data) {
  const status = ["succeeded", "failed", "cancelled"].includes(data.status) ? data.status : "failed";
  const end = {
    status,
    errorCode: data.error_code || "",
    errorLabel: data.error_code ? (ERROR_LABELS[data.error_code] ?? data.error_code) : "",
    errorDetail: data.error_detail || "",
    response: data.response || "",
    servedBy: data.served_by ? credentialLabel(data.served_by) : "",
  };
  return { ...turn, status, end, sessionId: data.session_id || turn.sessionId };
}

const why = (code) => (code ? (WHY_LABELS[code] ?? code) : "");

const REDUCERS = {
  turn: (t, d) => ({
    ...t,
    status: t.end ? t.status : "running",
    executionId: d.execution_id ?? t.executionId,
    agent: d.agent ?? t.agent,
    owner: d.owner ?? t.owner,
    sessionId: d.session_id || t.sessionId,
    message: d.message ?? t.message,
  }),
  sent: (t, d, s) => addItem(t, { kind: "sent", attempt: d.attempt ?? 0, on: credentialLabel(d.on), why: why(d.why) }, s),
  text: (t, d) => addText(t, d),
  tool_call: (t, d, s) => addItem(t, { kind: "tool", attempt: d.attempt ?? 0, id: d.id, name: d.name ?? "", input: d.input ?? "", result: null }, s),
  tool_result: (t, d, s) => addToolResult(t, d, s),
  truncated: (t, d, s) => addItem(t, { kind: "truncated", attempt: d.attempt ?? 0, dropped: d.dropped ?? 0 }, s),
  refused: (t, d, s) =>
    addItem(
      t,
      {
        kind: "refused",
        attempt: d.attempt ?? 0,
        by: credentialLabel(d.by),
        errorCode: d.error_code || "",
        errorLabel: d.error_code ? (ERROR_LABELS[d.error_code] ?? d.error_code) : "",
        resetsAt: d.resets_at ?? null,
      },
      s,
    ),
  walking: walk,
  served: (t, d, s) => addItem(t, { kind: "served", attempt: d.attempt ?? 0, by: credentialLabel(d.by) }, s),
  committed: (t, d, s) => addItem(t, { kind: "committed", from: d.from ?? null, to: d.to ?? "" }, s),
  parked: (t, d, s) => addItem({ ...t, status: t.end ? t.status : "parked", parkedUntil: d.until ?? null }, { kind: "parked", until: d.until ?? null }, s),
  end: finish,
};

/**
 * A turn that answered plain JSON (an ExecutionOutput: a server that does not stream)
 * as the state its `end` event would have left.
 */
export function fromExecution(turn, execution) {
  const served = execution.served_by_kind
    ? { kind: execution.served_by_kind, name: execution.served_by_subscription?.name ?? "" }
    : null;
  const withId = withExecutionId(turn, execution.id);
  if (!["succeeded", "failed", "cancelled"].includes(execution.status)) {
    return { ...withId, status: execution.status === "parked" ? "parked" : "running", parkedUntil: execution.parked_until ?? null };
  }
  return finish(withId, { ...execution, served_by: served });
}

export const STATUS_LABELS = {
  starting: "Starting…",
  running: "Running…",
  parked: "Parked",
  succeeded: "Succeeded",
  failed: "Failed",
  cancelled: "Cancelled",
};

/** The status line: "Succeeded on plan-b", "Failed: rate limit (rate_limit). …", "Parked until …". */
export function statusLine(turn, formatTime = String) {
  const label = STATUS_LABELS[turn.status] ?? turn.status;
  const end = turn.end;
  if (turn.status === "parked") return turn.parkedUntil ? `${label} until ${formatTime(turn.parkedUntil)}` : label;
  if (!end) return label;
  if (end.status === "succeeded") return end.servedBy ? `${label} on ${end.servedBy}` : label;
  // A cancelled turn's code is "cancelled": the label says it already.
  const code = end.errorCode && end.errorCode !== end.status ? `: ${end.errorLabel} (${end.errorCode})` : "";
  return `${label}${code}${end.errorDetail ? `. ${end.errorDetail}` : ""}`;
}

/**
 * A walk item of the timeline in words ({kind: "tool"} items excepted: they show
 * their name, input and result as they are). `formatTime` formats an instant.
 */
export function itemLine(item, formatTime = String) {
  switch (item.kind) {
    case "sent":
      return `Sent on ${item.on}${item.why ? ` (${item.why})` : ""}`;
    case "refused": {
      const code = item.errorCode ? `: ${item.errorLabel} (${item.errorCode})` : "";
      const reset = item.resetsAt ? `, resets ${formatTime(item.resetsAt)}` : "";
      return `Refused by ${item.by}${code}${reset}`;
    }
    case "walking":
      return `Walking to ${item.to}${item.why ? ` (${item.why})` : ""}${item.clearedText ? "; the refused attempt's text was discarded" : ""}`;
    case "served":
      return `Served by ${item.by}`;
    case "committed":
      return `Committed: the agent now runs on ${item.to}${item.from ? ` (was ${item.from})` : ""}`;
    case "parked":
      return item.until ? `Parked until ${formatTime(item.until)}` : "Parked";
    case "truncated":
      return `Output cut short: ${item.dropped} more event${item.dropped === 1 ? "" : "s"} not shown (the turn went on)`;
    default:
      return item.kind;
  }
}
