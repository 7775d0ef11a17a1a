// Following one turn's events over the network: the POST that starts a streamed turn
// (or the GET of a replay) and, when that stream drops before the turn's `end`, the
// resume: GET /api/executions/{id}/events?after=<last seq>, read by the same parser.
// The events' meaning is liveTurn.js's; this only moves them.
import { agentPath } from "./agentPaths.js";
import { openStream } from "./api.js";
import { parseTurnEvent } from "./liveTurn.js";
import { readSse } from "./sse.js";

export class StreamLost extends Error {
  constructor(message) {
    super(message);
    this.name = "StreamLost";
  }
}

/** GET /api/executions/{id}/events, after a seq (0: from the start). */
export function eventsPath(executionId, after = 0) {
  const path = `/api/executions/${encodeURIComponent(executionId)}/events`;
  return after > 0 ? `${path}?after=${after}` : path;
}

/** Open a streamed task or chat turn: POST /api/agents/{name}/{mode} with `stream: true`. */
export function startTurn({ agent, mode, message, sessionId = null }, signal) {
  const body = { message, stream: true };
  if (mode === "chat" && sessionId) body.session_id = sessionId;
  return openStream("POST", agentPath(agent, `/${mode}`), body, signal);
}

/** Open an execution's events (a replay, or following a turn from the start). */
export function openEvents(executionId, signal) {
  return openStream("GET", eventsPath(executionId), undefined, signal);
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(new DOMException("aborted", "AbortError"));
    });
  });
}

/**
 * Follow a turn to its `end` (or `parked`). `open(signal)` gives the first Response.
 * Calls `onEvent({seq, kind, data})` per event, `onExecutionId(id)` as soon as the id
 * is known, `onJson(body)` when the server answered JSON instead of a stream, and
 * `onReconnecting(n)` before the n-th resume in a row. Resolves when the turn is
 * over; rejects with an ApiError when a request is refused, with StreamLost after
 * `retries` resumes in a row brought nothing, or when `signal` aborts.
 */
export async function followTurn({ open, onEvent, onExecutionId, onJson, onReconnecting, signal, retries = 5, delayMs = 1000 }) {
  const seen = { id: null, lastSeq: 0, over: false };
  const learnId = (id) => {
    if (id && !seen.id) {
      seen.id = id;
      onExecutionId?.(id);
    }
  };
  const handle = (sse) => {
    const seq = Number.parseInt(sse.id, 10);
    if (Number.isFinite(seq) && seq > seen.lastSeq) seen.lastSeq = seq;
    const event = parseTurnEvent(sse);
    if (!event) return;
    if (event.kind === "turn") learnId(event.data.execution_id);
    if (event.kind === "end" || event.kind === "parked") seen.over = true;
    onEvent(event);
  };
  let response = await open(signal);
  learnId(response.headers.get("x-execution-id"));
  if ((response.headers.get("content-type") || "").includes("application/json")) {
    onJson?.(await response.json());
    return;
  }
  for (let failures = 0; ; ) {
    const before = seen.lastSeq;
    if (response) await readSse(response.body, handle).catch((e) => rethrowIfAborted(e, signal));
    if (seen.over) return;
    if (seen.lastSeq > before) failures = 0;
    if (!seen.id) throw new StreamLost("The stream closed before the turn started.");
    if (failures >= retries) throw new StreamLost("Lost the turn's stream; it may still be running. Open its replay to see how it ends.");
    failures += 1;
    onReconnecting?.(failures);
    await sleep(delayMs * failures, signal);
    response = await resume(seen, signal);
  }
}

function rethrowIfAborted(error, signal) {
  if (signal?.aborted) throw error;
}

// A failed resume (the server unreachable, a 5xx, a 429) is retried; a refusal
// (404: the turn is gone; 403: not yours any more) is final.
async function resume(seen, signal) {
  try {
    return await openStream("GET", eventsPath(seen.id, seen.lastSeq), undefined, signal);
  } catch (e) {
    rethrowIfAborted(e, signal);
    const final = e.status >= 400 && e.status < 500 && e.status !== 429;
    if (final) throw e;
    return null;
  }
}
