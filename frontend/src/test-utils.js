// Test helpers: a fetch stand-in that answers by "METHOD /path" and records calls.
import { vi } from "vitest";

/** A cursor page of a growing list, as the API answers it (`next` is the older page). */
export function page(results, next = null) {
  return { next, previous: null, results };
}

export function json(status, body) {
  return { status, body, type: "application/json" };
}

/** Django's HTML 404 for an unknown URL: no JSON body. */
export const NO_ROUTE = { status: 404, body: "<h1>Not Found</h1>", type: "text/html" };

export function mockFetch(routes) {
  const calls = [];
  const fetchMock = vi.fn(async (url, init = {}) => {
    const method = init.method || "GET";
    const key = `${method} ${url}`;
    calls.push({ method, url, headers: init.headers || {}, body: init.body ? JSON.parse(init.body) : undefined });
    let answer = routes[key] ?? routes[`${method} ${url.split("?")[0]}`];
    if (typeof answer === "function") answer = await answer(calls[calls.length - 1]);
    if (!answer) answer = NO_ROUTE;
    const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body ?? null);
    if (init.signal?.aborted) throw new DOMException("aborted", "AbortError");
    return {
      ok: answer.status >= 200 && answer.status < 300,
      status: answer.status,
      headers: {
        get: (h) => {
          const name = h.toLowerCase();
          if (name === "content-type") return answer.type ?? "application/json";
          return answer.headers?.[name] ?? null;
        },
      },
      json: async () => JSON.parse(text),
      body: answer.stream ?? null,
    };
  });
  vi.stubGlobal("fetch", fetchMock);
  return { calls, fetchMock };
}

/** An answer whose body is an SSE stream (see `controlledStream`, `streamOf`). */
export function eventStream(stream, headers = {}) {
  return { status: 200, body: "", type: "text/event-stream", stream, headers };
}

/** One SSE event as the server writes it. */
export function sseEvent(seq, kind, data) {
  return `id: ${seq}\nevent: ${kind}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** A byte stream that yields `chunks` (strings) and closes. */
export function streamOf(chunks) {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

/**
 * A byte stream the test feeds: `push(text)`, `close()`, `fail()` (the connection
 * drops). Reading stays pending between pushes, as a live turn's stream does.
 */
export function controlledStream() {
  const encoder = new TextEncoder();
  let controller;
  const stream = new ReadableStream({
    start(c) {
      controller = c;
    },
  });
  return {
    stream,
    push: (text) => controller.enqueue(encoder.encode(text)),
    close: () => controller.close(),
    fail: () => controller.error(new TypeError("network error")),
  };
}

export async function settle() {
  for (let i = 0; i < 6; i += 1) await new Promise((resolve) => setTimeout(resolve, 0));
}

export const ADMIN = { username: "root", is_admin: true };
export const OPERATOR = { username: "operator", is_admin: false };
