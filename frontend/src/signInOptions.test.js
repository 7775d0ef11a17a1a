import { describe, expect, it } from "vitest";
import { ssoErrorText } from "./signInOptions.js";

describe("ssoErrorText", () => {
  it.each([
    ["", ""],
    ["denied", "Sign-in with Okta was cancelled or refused."],
    ["inactive", "Your account is deactivated. Ask an admin to turn it back on."],
    ["unavailable", "Okta could not be reached. Try again in a moment."],
    ["failed", "Sign-in with Okta did not complete. Try again."],
    ["anything-else", "Sign-in with Okta did not complete. Try again."],
  ])("%s", (reason, text) => {
    expect(ssoErrorText(reason, "Okta")).toBe(text);
  });

  it("names a generic provider when none is configured", () => {
    expect(ssoErrorText("denied", "")).toBe("Sign-in with your identity provider was cancelled or refused.");
  });
});
