import { afterEach, describe, expect, it, vi } from "vitest";
import { api, ApiError, setSessionLostHandler } from "./api.js";
import { json, mockFetch, NO_ROUTE } from "./test-utils.js";

afterEach(() => {
  document.cookie = "csrftoken=; expires=Thu, 01 Jan 1970 00:00:00 GMT";
  setSessionLostHandler(null);
});

describe("api", () => {
  it("sends the CSRF cookie's token on writes, not on reads", async () => {
    document.cookie = "csrftoken=tok123";
    const { calls } = mockFetch({ "GET /api/x": json(200, {}), "PUT /api/x": json(200, {}) });
    await api.get("/api/x");
    await api.put("/api/x", { enabled: true });
    expect(calls[0].headers["X-CSRFToken"]).toBeUndefined();
    expect(calls[1].headers["X-CSRFToken"]).toBe("tok123");
    expect(calls[1].body).toEqual({ enabled: true });
  });

  it("tells a missing route from a missing object", async () => {
    mockFetch({ "GET /api/gone": json(404, { detail: "No subscription with id 9." }), "GET /api/nowhere": NO_ROUTE });
    const missingObject = await api.get("/api/gone").catch((e) => e);
    const missingRoute = await api.get("/api/nowhere").catch((e) => e);
    expect(missingObject.endpointMissing).toBe(false);
    expect(missingObject.message).toBe("No subscription with id 9.");
    expect(missingRoute.endpointMissing).toBe(true);
  });

  it("exposes DRF field errors and uses the first as the message", async () => {
    mockFetch({ "POST /api/subscriptions": json(400, { token: ["A token is required."] }) });
    const error = await api.post("/api/subscriptions", {}).catch((e) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error.fieldErrors).toEqual({ token: "A token is required." });
    expect(error.message).toBe("A token is required.");
  });

  it("says what to do when the server can't be reached", async () => {
    vi.stubGlobal("fetch", vi.fn().mockRejectedValue(new TypeError("Failed to fetch")));
    const error = await api.get("/api/x").catch((e) => e);
    expect(error.status).toBe(0);
    expect(error.message).toMatch(/Check that Trinity is running/);
  });

  it("reports a lost session once the API answers unauthenticated", async () => {
    const lost = vi.fn();
    setSessionLostHandler(lost);
    mockFetch({
      "GET /api/subscriptions": json(403, { detail: "Authentication credentials were not provided." }),
      "GET /api/settings/platform-api-key": json(403, { detail: "Only an admin can do this." }),
    });
    await api.get("/api/settings/platform-api-key").catch(() => {});
    expect(lost).not.toHaveBeenCalled();
    await api.get("/api/subscriptions").catch(() => {});
    expect(lost).toHaveBeenCalledOnce();
  });
});
