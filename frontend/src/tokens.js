// Client-side checks on pasted credentials, the same as subscriptions/tokens.py and
// trinity/services.py run, so a wrong paste is caught before it leaves the browser; the
// server stays authoritative. The prefixes and lengths are the server's own
// (routing/credential_shapes.py, written into generated/tables.json by
// `manage.py panel_tables`). Messages never echo the value.
import tables from "./generated/tables.json";

const SHAPES = tables.token_shapes;
export const ANTHROPIC_PLAN_PREFIX = SHAPES.anthropic_plan_prefix;
export const PLATFORM_API_KEY_PREFIX = SHAPES.platform_api_key_prefix;
export const OPENAI_KEY_PREFIX = SHAPES.openai_key_prefix;
const ANTHROPIC_PREFIX = SHAPES.anthropic_prefix;
const ANTHROPIC_OAUTH_PREFIX = SHAPES.anthropic_oauth_prefix;
const JWT_PREFIX = SHAPES.jwt_prefix;
const JWT = new RegExp(SHAPES.jwt_pattern);

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
    if (!token.startsWith(ANTHROPIC_PLAN_PREFIX) || token.length < ANTHROPIC_PLAN_PREFIX.length + SHAPES.anthropic_plan_min_body) {
      return `A Claude plan token starts with '${ANTHROPIC_PLAN_PREFIX}' (run \`claude setup-token\` to get one).`;
    }
    return null;
  }
  return "Choose a provider first.";
}

// A Codex plan's credential is the auth.json `codex login` wrote (the platform refreshes
// it), or a bare access token (a JWT; it cannot be refreshed once it expires).
function codexCredentialProblem(token) {
  if (token.startsWith(OPENAI_KEY_PREFIX)) {
    return (
      "This is an API key, which bills per token: it belongs in Settings → OpenAI platform " +
      "key. A ChatGPT/Codex subscription needs the auth.json `codex login` wrote."
    );
  }
  if (!token.startsWith("{")) {
    if (!token.startsWith(JWT_PREFIX) || !JWT.test(token)) {
      return (
        "A ChatGPT/Codex plan credential is the auth.json `codex login` wrote, or its access " +
        `token (a JWT: three dot-separated parts starting with '${JWT_PREFIX}').`
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
  if (key.startsWith(ANTHROPIC_OAUTH_PREFIX)) {
    return "This is a Claude plan OAuth token; register it as a subscription instead.";
  }
  if (key.startsWith(OPENAI_KEY_PREFIX) && !key.startsWith(ANTHROPIC_PREFIX)) {
    return "This is an OpenAI API key; set it as the OpenAI platform key (Settings → OpenAI platform key) instead.";
  }
  if (!key.startsWith(PLATFORM_API_KEY_PREFIX) || key.length < SHAPES.platform_key_min_length || /\s/.test(key)) {
    return `An Anthropic platform API key starts with '${PLATFORM_API_KEY_PREFIX}'.`;
  }
  return null;
}

/** Returns null when `raw` looks like an OpenAI platform key (sk-proj-…, sk-svcacct-…), else what is wrong. */
export function openaiKeyProblem(raw) {
  const key = (raw || "").trim();
  if (!key) return "Paste the key first.";
  if (key.startsWith(ANTHROPIC_OAUTH_PREFIX)) {
    return "This is a Claude plan OAuth token; register it as a subscription instead.";
  }
  if (key.startsWith(ANTHROPIC_PREFIX)) {
    return "This is an Anthropic API key; set it as the Anthropic platform API key (Settings → Platform API key) instead.";
  }
  if (key.startsWith(JWT_PREFIX)) {
    return "This is a ChatGPT/Codex plan token; register it as a subscription instead.";
  }
  if (!key.startsWith(OPENAI_KEY_PREFIX) || key.length < SHAPES.platform_key_min_length || /\s/.test(key)) {
    return `An OpenAI platform key starts with '${OPENAI_KEY_PREFIX}' (e.g. 'sk-proj-' or 'sk-svcacct-').`;
  }
  return null;
}
