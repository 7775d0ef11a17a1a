"""The gateway's one way to a provider: where a rung's credential is spent, the
headers that go with it, and what a refused answer means.

The client's own credential headers (its gateway key) never go upstream and the
upstream's never come back (``agent_server/relay.py``'s dropped sets, both ways); the
URL is always the provider's configured base URL, whatever the client sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from agent_server.classifier import (
    classify_codex_refusal,
    classify_runtime_refusal,
    parse_unified_reset,
)
from agent_server.relay import REQUEST_DROPPED
from agent_server.upstream import UpstreamRefusal, parse_refusal
from gateway.catalog import ANTHROPIC
from routing.planner import Outcome
from routing.rung import Rung, RungKind
from trinity_contract.redaction import mask

CODEX_RESPONSES_PATH: Final = "/backend-api/codex/responses"
# A plan's OAuth token is accepted by the Messages API only with this beta named.
OAUTH_BETA: Final = "oauth-2025-04-20"
# Headers that describe the client's request body or connection: the client sets its own.
_ALSO_DROPPED: Final = frozenset({"content-length", "anthropic-beta"})


@dataclass(frozen=True)
class Upstreams:
    """The providers' configured base URLs."""

    anthropic: str
    codex: str
    openai: str

    def url(self, rung: Rung, path: str) -> str:
        """Where ``rung`` is spent for a request on ``path``: a Codex plan's token at
        the ChatGPT backend's Codex path, an OpenAI key at the platform API, a Claude
        credential at the Anthropic API (the path as the client sent it)."""
        if rung.provider != ANTHROPIC:
            if rung.kind is RungKind.SUBSCRIPTION:
                return self.codex + CODEX_RESPONSES_PATH
            return self.openai + path
        return self.anthropic + path


def request_headers(headers: list[tuple[bytes, bytes]], rung: Rung) -> list[tuple[bytes, bytes]]:
    """The client's headers without its credential or hop-by-hop ones, with ``rung``'s
    credential in its provider's form."""
    kept: list[tuple[bytes, bytes]] = []
    betas: list[str] = []
    for name, value in headers:
        lowered = name.decode("latin-1").lower()
        if lowered == "anthropic-beta":
            betas += [b.strip() for b in value.decode("latin-1").split(",") if b.strip()]
        elif lowered not in REQUEST_DROPPED and lowered not in _ALSO_DROPPED:
            kept.append((name, value))
    secret = rung.secret.reveal()
    if rung.provider == ANTHROPIC and rung.kind is RungKind.API_KEY:
        kept.append((b"x-api-key", secret.encode()))
    else:
        kept.append((b"authorization", b"Bearer " + secret.encode()))
    if (
        rung.provider == ANTHROPIC
        and rung.kind is RungKind.SUBSCRIPTION
        and OAUTH_BETA not in betas
    ):
        betas.append(OAUTH_BETA)
    if betas:
        kept.append((b"anthropic-beta", ",".join(betas).encode()))
    if rung.account_id:
        kept.append((b"chatgpt-account-id", rung.account_id.encode()))
    kept.append((b"accept-encoding", b"identity"))
    return kept


@dataclass(frozen=True)
class Refusal:
    """A refused answer as the planner reads it, and whether it is ``held`` for the
    planner (a quota or credential refusal, a provider failure: the client never sees
    it) or is the client's to read (a bad request, an unknown model)."""

    outcome: Outcome
    held: bool
    status: int


def classify(
    *, rung: Rung, status: int, body: bytes, headers: Mapping[str, str], now: datetime
) -> Refusal:
    """What an error answer (status >= 400) on ``rung`` means for the request."""
    secret = rung.secret.reveal()
    refusal = parse_refusal(
        status=status,
        body=body,
        headers=headers,
        received_at=now,
        redact=lambda text: text.replace(secret, mask(secret)),
    )
    said = _said(refusal)
    if rung.provider == ANTHROPIC:
        verdict = classify_runtime_refusal(
            api_error_status=status,
            text=f"{refusal.error_type or ''}: {refusal.message}",
            now=now,
            reset_hint=parse_unified_reset(headers.get("anthropic-ratelimit-unified-reset")),
        )
        claim = (headers.get("anthropic-ratelimit-unified-representative-claim") or "").strip()
        window = claim[:40] if claim and verdict.error_code == "rate_limit" else ""
        outcome = Outcome(False, verdict.error_code, said, verdict.resets_at, window)
    else:
        codex = classify_codex_refusal(refusal=refusal, text="", now=now)
        outcome = Outcome(
            False, codex.error_code, said, codex.resets_at, codex.limiting_window or ""
        )
    # A quota or credential refusal walks; a provider failure the planner retries once.
    held = outcome.error_code in ("rate_limit", "auth") or status >= 500
    return Refusal(outcome, held, status)


def _said(refusal: UpstreamRefusal) -> str:
    kind = " ".join(dict.fromkeys(w for w in (refusal.error_type, refusal.error_code) if w))
    return (
        f"API Error: {refusal.status}"
        + (f" {kind}" if kind else "")
        + (f": {refusal.message}" if refusal.message else "")
    )
