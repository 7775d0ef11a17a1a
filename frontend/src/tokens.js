// Client-side checks on pasted credentials. They mirror subscriptions/tokens.py and
// trinity/services.py so a wrong paste is caught before it leaves the browser; the
// server runs the same checks and stays authoritative. Messages never echo the value.

export const ANTHROPIC_PLAN_PREFIX = "sk-ant-oat01-";
export const PLATFORM_API_KEY_PREFIX = "sk-ant-api";
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** Returns null when `raw` looks like a plan token for `provider`, else what is wrong. */
export function planTokenProblem(provider, raw) {
  const token = (raw || "").trim();
  if (!token) return "A token is required.";
  if (provider === "openai-codex") return codexCredentialProblem(token);
  if (/\s/.test(token)) return "A token has no spaces or line breaks.";
  if (provider === "anthropic") {
    if (token.startsWith(PLATFORM_API_KEY_PREFIX)) {
      return (
        "This is an Anthropic API key, which bills per token. It belongs in the platform " +
        "API key setting (Settings → Platform API key), not in a subscription."
      );
    }
    if (!token.startsWith(ANTHROPIC_PLAN_PREFIX) || token.length < ANTHROPIC_PLAN_PREFIX.length + 16) {
      return `A Claude plan token starts with '${ANTHROPIC_PLAN_PREFIX}' (run \`claude setup-token\` to get one).`;
    }
    return null;
  }
  return "Choose a provider first.";
}

// A Codex plan's credential is the auth.json `codex login` wrote (the platform refreshes
// it), or a bare access token (a JWT; it cannot be refreshed once it expires).
function codexCredentialProblem(token) {
  if (token.startsWith("sk-")) {
    return (
      "This is an API key, which bills per token: it belongs in Settings → OpenAI platform " +
      "key. A ChatGPT/Codex subscription needs the auth.json `codex login` wrote."
    );
  }
  if (!token.startsWith("{")) {
    if (!token.startsWith("eyJ") || !JWT.test(token)) {
      return (
        "A ChatGPT/Codex plan credential is the auth.json `codex login` wrote, or its access " +
        "token (a JWT: three dot-separated parts starting with 'eyJ')."
      );
    }
    return null;
  }
  let document;
  try {
    document = JSON.parse(token);
  } catch {
    return "The credential is not valid JSON.";
  }
  const tokens = document.tokens ?? document;
  if (typeof tokens !== "object" || tokens === null) return "tokens must be an object.";
  if (typeof tokens.access_token !== "string" || !JWT.test(tokens.access_token.trim())) {
    return "tokens.access_token is missing or not a JWT.";
  }
  if (typeof tokens.refresh_token !== "string" || !tokens.refresh_token.trim()) {
    return "tokens.refresh_token is missing: paste the whole auth.json `codex login` wrote.";
  }
  return null;
}

/** Returns null when `raw` looks like an Anthropic platform API key, else what is wrong. */
export function platformKeyProblem(raw) {
  const key = (raw || "").trim();
  if (!key) return "Paste the key first.";
  if (key.startsWith("sk-ant-oat")) {
    return "This is a Claude plan OAuth token; register it as a subscription instead.";
  }
  if (key.startsWith("sk-") && !key.startsWith("sk-ant-")) {
    return "This is an OpenAI API key; set it as the OpenAI platform key (Settings → OpenAI platform key) instead.";
  }
  if (!key.startsWith(PLATFORM_API_KEY_PREFIX) || key.length < 20 || /\s/.test(key)) {
    return `An Anthropic platform API key starts with '${PLATFORM_API_KEY_PREFIX}'.`;
  }
  return null;
}

export const OPENAI_KEY_PREFIX = "sk-";

/** Returns null when `raw` looks like an OpenAI platform key (sk-proj-…, sk-svcacct-…), else what is wrong. */
export function openaiKeyProblem(raw) {
  const key = (raw || "").trim();
  if (!key) return "Paste the key first.";
  if (key.startsWith("sk-ant-oat")) {
    return "This is a Claude plan OAuth token; register it as a subscription instead.";
  }
  if (key.startsWith("sk-ant-")) {
    return "This is an Anthropic API key; set it as the Anthropic platform API key (Settings → Platform API key) instead.";
  }
  if (key.startsWith("eyJ")) {
    return "This is a ChatGPT/Codex plan token; register it as a subscription instead.";
  }
  if (!key.startsWith(OPENAI_KEY_PREFIX) || key.length < 20 || /\s/.test(key)) {
    return `An OpenAI platform key starts with '${OPENAI_KEY_PREFIX}' (e.g. 'sk-proj-' or 'sk-svcacct-').`;
  }
  return null;
}
