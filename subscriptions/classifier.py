"""The one classifier of a refused turn attempt: what it says about the credential.

Pure: no Django, no I/O. The agent server's typed ``error_code`` is read first and
its text second (an agent server that predates typed codes answers with text only).
Only ``rate_limit`` and ``auth`` walk and are recorded against the credential; a model
rejection, a killed process, a timeout or a container fault says nothing about the
credential and never switches anything.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import NamedTuple

RATE_LIMIT = "rate_limit"
AUTH = "auth"

# Codes the agent server's contract defines. Anything else is read as text.
TYPED_CODES = frozenset(
    {
        "rate_limit",
        "auth",
        "model_unsupported",
        "container_fault",
        "timeout",
        "runtime_killed",
        "upstream_error",
        "invalid_request",
        "unauthorized",
    }
)

# Signs that the process was killed (a signal, a shell-encoded 137/143, the OOM killer).
_KILL_TEXT = re.compile(
    r"\bSIG(?:KILL|TERM)\b|\b(?:exit(?:ed)?|status|code)\D{0,12}(?:137|143)\b"
    r"|out of memory|\bOOM\b|oom[-_ ]?kill",
    re.IGNORECASE,
)
_RATE_LIMIT_TEXT = re.compile(
    r"hit your (?:\w+ )?limit|usage limit|rate[ _-]?limit|quota exceeded|\b429\b", re.IGNORECASE
)
_BILLING_TEXT = re.compile(r"credit balance is too low|billing|payment required", re.IGNORECASE)
_AUTH_TEXT = re.compile(
    r"failed to authenticate|not logged in|invalid api key|invalid x-api-key|unauthorized"
    r"|oauth token has expired|token (?:has been )?revoked|authentication_error"
    r"|permission_error|invalid bearer token|\b401\b|\b403\b",
    re.IGNORECASE,
)
_MODEL_TEXT = re.compile(
    r"issue with the selected model|not_found_error|model .*(?:not found|does not exist)",
    re.IGNORECASE,
)


# The trail's word for a 429 with no quota evidence (``_no_quota_evidence``).
THROTTLED = "throttled"
# The trail's words for a refusal a reset, a top-up or a wait fixes (not a dead
# credential).
QUOTA_REASONS = frozenset({"rate limit", "billing", THROTTLED})


class Refusal(NamedTuple):
    """What one refused attempt means.

    ``error_code`` is the turn's typed code; ``failure_kind`` is what is recorded
    against the credential (``rate_limit`` | ``auth``) or None when nothing is;
    ``reason`` is the trail's word (``rate limit``, ``auth``, ``billing``, …).
    """

    error_code: str
    failure_kind: str | None
    reason: str

    @property
    def quota(self) -> bool:
        """A plan out of quota or a key out of credit: a turn it ends is ``billing``."""
        return self.reason in QUOTA_REASONS

    @property
    def walks(self) -> bool:
        """Only quota and credential refusals move a turn to another credential."""
        return self.failure_kind is not None

    @property
    def throttle(self) -> bool:
        """A 429 with no quota evidence: the subscription backs off briefly."""
        return self.reason == THROTTLED


class QuotaEvidence(NamedTuple):
    """What a refusal itself said about quota: the reset and the limiting window."""

    resets_at: datetime | None
    limiting_window: str


_NEVER_WALKS = {
    "model_unsupported": "model rejected",
    "container_fault": "container fault",
    "timeout": "timeout",
    "runtime_killed": "killed",
    "upstream_error": "upstream error",
    "invalid_request": "invalid request",
    "unauthorized": "agent server refused the platform's secret",
}


def classify_refusal(
    *, error_code: str, detail: str, evidence: QuotaEvidence | None = None
) -> Refusal:
    """Classify a refused attempt from the agent server's typed code, else its text.

    With ``evidence`` (what the answer said besides its text), a rate limit that
    carries no quota evidence at all is a throttle (reason ``throttled``); without
    it nothing can tell, and a rate limit is one.
    """
    typed = error_code in TYPED_CODES
    code = error_code if typed else _code_from_text(detail)
    if (code == AUTH or not typed) and _KILL_TEXT.search(detail):
        # A killed process prints whatever its last line was: the kill, not the text,
        # is the cause, and a kill is never a credential problem.
        return Refusal("runtime_killed", None, _NEVER_WALKS["runtime_killed"])
    if code == RATE_LIMIT:
        if evidence is not None and _no_quota_evidence(detail, evidence):
            return Refusal(RATE_LIMIT, RATE_LIMIT, THROTTLED)
        return Refusal(RATE_LIMIT, RATE_LIMIT, "rate limit")
    if code == AUTH:
        # The platform key's "credit balance is too low" is an auth-class refusal (the
        # credential cannot pay); the trail calls it what the operator must fix.
        return Refusal(AUTH, AUTH, "billing" if _BILLING_TEXT.search(detail) else "auth")
    return Refusal(code, None, _NEVER_WALKS.get(code, code))


# Words only a usage-limit refusal carries (the CLI's "You've hit your limit", the
# API's "usage limit"); a bare 429 or "rate_limit_error" is no quota evidence, and
# neither is the CLI's throttle sentence, "Server is temporarily limiting requests
# (not your usage limit)".
_QUOTA_TEXT = re.compile(
    r"hit your (?:[\w-]+ )?limit|(?<!not your )usage limit|quota exceeded", re.IGNORECASE
)


def _no_quota_evidence(detail: str, evidence: QuotaEvidence) -> bool:
    """A rate limit is a throttle when it carries no quota evidence: no reset, no
    limiting window (the provider's representative claim, sent with the unified
    headers), no usage-limit words. The provider sends those with a plan-exhaustion
    429; a throttle (a burst, or ``x-should-retry`` only) sends none, and treating it
    as an exhausted plan benched healthy accounts for hours. A throttle walks like any
    rate limit; only how long the subscription is kept out differs (a short backoff,
    not the 2h skip window)."""
    return (
        evidence.resets_at is None
        and not evidence.limiting_window
        and not _QUOTA_TEXT.search(detail)
    )


def _code_from_text(detail: str) -> str:
    if _RATE_LIMIT_TEXT.search(detail):
        return RATE_LIMIT
    if _BILLING_TEXT.search(detail) or _AUTH_TEXT.search(detail):
        return AUTH
    if _MODEL_TEXT.search(detail):
        return "model_unsupported"
    return "upstream_error"
