// Notification channels: labels, and the checks the form makes before sending.

export const CHANNEL_KINDS = { slack: "Slack-compatible webhook", json: "JSON POST" };
export const LEVELS = { info: "Info", warning: "Warning", critical: "Critical" };
// The kinds the platform sends today (trinity/notifications.py callers).
export const NOTIFICATION_KINDS = {
  subscription_switched: "Subscription switched",
  api_key_route: "Billing moved to the platform API key",
  subscription_return: "Back on a subscription",
  pool_exhausted: "No credential could serve a turn",
  headroom_alert: "Usage alert",
  codex_sign_in_dead: "A Codex plan must be signed in again",
};

/** Where a channel posts, as far as it may be shown: its host and the URL's last four. */
export function channelDestination(channel) {
  return channel.url_fingerprint ? `${channel.url_host} …${channel.url_fingerprint}` : channel.url_host;
}

export function channelKindsLabel(kinds) {
  if (!kinds?.length) return "every kind";
  return kinds.map((k) => NOTIFICATION_KINDS[k] ?? k).join(", ");
}

/** A message for a URL the server would refuse, or "" (never echoing the URL). */
export function webhookUrlProblem(raw) {
  const url = String(raw ?? "").trim();
  if (!url) return "Paste the webhook URL.";
  if (/\s/.test(url)) return "A webhook URL is one line without spaces.";
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return "A webhook URL starts with https:// (or http://) and a host.";
  }
  if (!["http:", "https:"].includes(parsed.protocol) || !parsed.hostname) {
    return "A webhook URL starts with https:// (or http://) and a host.";
  }
  return "";
}
