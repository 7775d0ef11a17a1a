// How one may sign in (GET /api/auth/options), and what a failed single sign-on means.
import { api } from "./api.js";

// A server without the endpoint (or unreachable for it) signs in with passwords only.
export const PASSWORDS_ONLY = { sso: { enabled: false, label: "", start_url: "" }, local_passwords: true };

export async function readSignInOptions() {
  try {
    return (await api.get("/api/auth/options")) ?? PASSWORDS_ONLY;
  } catch {
    return PASSWORDS_ONLY;
  }
}

/** The sentence for the callback's `?sso_error=` reason; "" when there is none. */
export function ssoErrorText(reason, provider) {
  const name = provider || "your identity provider";
  if (!reason) return "";
  if (reason === "denied") return `Sign-in with ${name} was cancelled or refused.`;
  if (reason === "inactive") return "Your account is deactivated. Ask an admin to turn it back on.";
  if (reason === "unavailable") return `${name} could not be reached. Try again in a moment.`;
  return `Sign-in with ${name} did not complete. Try again.`;
}

/** The `sso_error` reason in the page's address, removed from it (a reload must not show it again). */
export function takeSsoError(location = window.location, history = window.history) {
  const params = new URLSearchParams(location.search);
  const reason = params.get("sso_error") ?? "";
  if (reason) {
    params.delete("sso_error");
    const query = params.toString();
    history.replaceState(null, "", `${location.pathname}${query ? `?${query}` : ""}${location.hash}`);
  }
  return reason;
}
