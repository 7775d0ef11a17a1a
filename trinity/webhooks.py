"""The one module that talks to webhook receivers (Slack-compatible hooks, JSON POSTs).

A POST either reaches a receiver that answers 2xx (delivered) or yields a
``PostResult`` saying why not; it never raises for a receiver's fault and never puts
the URL into a result, an exception or a log line (the URL is the credential).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx

from trinity.crypto import Secret
from trinity.http import ProcessClient
from trinity.redaction import redact

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5.0
# A receiver gets this long to answer; a slower one is retried later, never waited for.
TOTAL_TIMEOUT = 10.0
ERROR_LENGTH = 300
USER_AGENT = "trinity-notifications/1"

_http = ProcessClient(
    lambda: httpx.Client(
        timeout=httpx.Timeout(TOTAL_TIMEOUT, connect=CONNECT_TIMEOUT),
        # A redirect would send the payload somewhere the admin never configured.
        follow_redirects=False,
        headers={"User-Agent": USER_AGENT},
        # Proxies from the environment do not apply to operator-configured hooks.
        trust_env=False,
    )
)


@dataclass(frozen=True)
class PostResult:
    delivered: bool
    status_code: int | None = None
    error: str = ""
    # Seconds a 429/503 asked us to wait (Retry-After), when it said.
    retry_after: int | None = None
    # A refusal no retry will change (the hook is gone, the payload is refused).
    permanent: bool = False


# Answers worth another try later; any other 4xx means the hook or payload is wrong.
RETRYABLE_4XX = frozenset({408, 425, 429})


def _retry_after(response: httpx.Response) -> int | None:
    raw = response.headers.get("retry-after", "")
    return int(raw) if raw.isdigit() else None


def post(*, url: Secret, payload: dict[str, Any]) -> PostResult:
    """POST ``payload`` as JSON to ``url``. Never raises for the receiver's fault."""
    try:
        response = _http.get().post(url.reveal(), json=payload)
    except httpx.HTTPError as exc:
        # httpx's messages name the failure, not the URL; redact anyway (a proxy or
        # resolver message may quote the host and path).
        error = redact(f"{type(exc).__name__}: {exc}")[:ERROR_LENGTH]
        return PostResult(delivered=False, error=error)
    code = response.status_code
    if 200 <= code < 300:
        return PostResult(delivered=True, status_code=code)
    body = redact(response.text.strip().replace("\n", " "))[:200]
    return PostResult(
        delivered=False,
        status_code=code,
        error=f"HTTP {code}" + (f": {body}" if body else ""),
        retry_after=_retry_after(response) if code in (429, 503) else None,
        permanent=400 <= code < 500 and code not in RETRYABLE_4XX,
    )


def slack_payload(*, level: str, title: str, body: str, agent_name: str) -> dict[str, Any]:
    """Slack's incoming-webhook shape (Mattermost and Rocket.Chat take it too)."""
    marker = {"critical": ":rotating_light:", "warning": ":warning:"}.get(
        level, ":information_source:"
    )
    lines = [f"{marker} *{title}*"]
    if body:
        lines.append(body)
    if agent_name:
        lines.append(f"_agent: {agent_name}_")
    return {"text": "\n".join(lines)}
