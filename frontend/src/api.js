// The one module that talks to the Django API: same-origin fetch with the session
// cookie, the CSRF header on every state-changing request, and errors that carry a
// message an operator can act on.

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

let onSessionLost = null;

/** Called when a request comes back unauthenticated (the session expired or ended). */
export function setSessionLostHandler(handler) {
  onSessionLost = handler;
}

export function csrfToken() {
  const match = document.cookie.split(";").map((c) => c.trim()).find((c) => c.startsWith("csrftoken="));
  return match ? decodeURIComponent(match.slice("csrftoken=".length)) : "";
}

function firstMessage(value) {
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.length) return firstMessage(value[0]);
  return "";
}

export class ApiError extends Error {
  constructor(status, body, retryAfter = null) {
    super(ApiError.describe(status, body));
    this.name = "ApiError";
    this.status = status;
    this.body = body;
    // Seconds, from a 429's Retry-After header; null when the server gave none.
    this.retryAfter = retryAfter;
  }

  /**
   * True when the server has no such route: Django answers an unknown URL with its
   * HTML 404 page, while the API answers a missing object with JSON.
   */
  get endpointMissing() {
    return this.status === 404 && this.body === null;
  }

  /** DRF field errors as {field: "first message"}; "detail" and "code" are not fields. */
  get fieldErrors() {
    const out = {};
    if (this.body && typeof this.body === "object" && !Array.isArray(this.body)) {
      for (const [key, value] of Object.entries(this.body)) {
        if (key === "detail" || key === "code") continue;
        const message = firstMessage(value);
        if (message) out[key] = message;
      }
    }
    return out;
  }

  static describe(status, body) {
    const detail = body && typeof body === "object" ? firstMessage(body.detail) : "";
    if (detail) return detail;
    if (body && typeof body === "object") {
      const fields = Object.entries(body).filter(([k]) => k !== "code");
      if (fields.length) return firstMessage(fields[0][1]);
    }
    if (status === 0) return "Can't reach the server. Check that Trinity is running, then try again.";
    if (status === 401) return "Your session has ended. Sign in again.";
    if (status === 403) return "Only an admin can do this.";
    if (status === 404) return "Not found. It may have been deleted; reload the page.";
    if (status === 429) return "Too many requests. Wait a moment, then try again.";
    if (status >= 500) return `The server failed (HTTP ${status}). Try again; if it keeps failing, check the web process's log.`;
    return `The request failed (HTTP ${status}).`;
  }
}

/**
 * Send one request. Resolves to the parsed JSON body (null for an empty one);
 * rejects with an ApiError. Status 0 means the server could not be reached.
 */
export async function request(method, path, body) {
  const response = await send(method, path, body, "application/json");
  const data = await jsonBody(response);
  if (!response.ok) throw failure(response, data, path);
  return data;
}

/** The fetch both kinds of request make: the CSRF header on a write, the session's cookie. */
async function send(method, path, body, accept, signal) {
  const headers = { Accept: accept };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (!SAFE_METHODS.has(method)) headers["X-CSRFToken"] = csrfToken();
  try {
    return await fetch(path, {
      method,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new ApiError(0, null);
  }
}

async function jsonBody(response) {
  const type = response.headers.get("content-type") || "";
  if (response.status === 204 || !type.includes("application/json")) return null;
  return response.json().catch(() => null);
}

/** The ApiError a refused response means; tells the app when the session is gone. */
function failure(response, data, path) {
  const retryAfter = Number.parseInt(response.headers.get("retry-after") ?? "", 10);
  const error = new ApiError(response.status, data, Number.isFinite(retryAfter) ? retryAfter : null);
  // DRF answers a missing session with 403 "Authentication credentials were not
  // provided."; the auth API with 401.
  const unauthenticated =
    response.status === 401 || (response.status === 403 && /credentials were not provided/i.test(error.message));
  if (unauthenticated && onSessionLost && !path.startsWith("/api/auth/")) onSessionLost();
  return error;
}

/**
 * Open a request that answers with an event stream (a live turn). Resolves to the
 * Response when it succeeded (its body not read: an event stream, or JSON from a server
 * that does not stream); rejects with an ApiError as `request` does. `signal` aborts it.
 */
export async function openStream(method, path, body, signal) {
  const response = await send(method, path, body, "text/event-stream", signal);
  if (!response.ok) throw failure(response, await jsonBody(response), path);
  return response;
}

export const api = {
  get: (path) => request("GET", path),
  post: (path, body) => request("POST", path, body ?? {}),
  put: (path, body) => request("PUT", path, body ?? {}),
  patch: (path, body) => request("PATCH", path, body ?? {}),
  delete: (path) => request("DELETE", path),
};
