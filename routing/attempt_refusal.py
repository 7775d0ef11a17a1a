"""The platform's classifier of a refused turn attempt: what the agent server's
typed code and detail mean for the credential and the walk. (How a runtime's raw
refusal becomes that code is the agent server's classifier,
``agent_server/classifier.py``; both read the same patterns, ``trinity_contract``.)

Pure: no Django, no I/O. The agent server's typed ``error_code`` is read first and
its text second (an agent server that predates typed codes answers with text only).
Only ``rate_limit`` and ``auth`` walk and are recorded against the credential; a model
rejection, a killed process, a timeout or a container fault says nothing about the
credential and never switches anything.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from trinity_contract.errors import ERROR_CODES
from trinity_contract.refusal_text import (
    BILLING_TEXT,
    KILL_TEXT,
    QUOTA_TEXT,
    error_code_from_text,
)

RATE_LIMIT = "rate_limit"
AUTH = "auth"


# The trail's word for a 429 with no quota evidence (``_no_quota_evidence``).
THROTTLED = "throttled"
# The trail's words for a refusal a reset, a top-up or a wait fixes (not a dead
# credential).
QUOTA_REASONS = frozenset({"rate limit", "billing", THROTTLED})


class AttemptRefusal(NamedTuple):
    """What one refused attempt means for the turn, the credential and the walk.

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
    # The forwarder refused the key past the turn's budget: the platform's own cap,
    # nothing the provider said of the key, so it is neither recorded nor walked.
    "billing": "key budget",
}


def classify_attempt_refusal(
    *, error_code: str, detail: str, evidence: QuotaEvidence | None = None
) -> AttemptRefusal:
    """Classify a refused attempt from the agent server's typed code, else its text
    (the shared patterns, ``trinity_contract.refusal_text``).

    With ``evidence`` (what the answer said besides its text), a rate limit that
    carries no quota evidence at all is a throttle (reason ``throttled``); without
    it nothing can tell, and a rate limit is one.
    """
    typed = error_code in ERROR_CODES
    code: str = error_code if typed else error_code_from_text(detail)
    if (code == AUTH or not typed) and KILL_TEXT.search(detail):
        # A killed process prints whatever its last line was: the kill, not the text,
        # is the cause, and a kill is never a credential problem.
        return AttemptRefusal("runtime_killed", None, _NEVER_WALKS["runtime_killed"])
    if code == RATE_LIMIT:
        if evidence is not None and _no_quota_evidence(detail, evidence):
            return AttemptRefusal(RATE_LIMIT, RATE_LIMIT, THROTTLED)
        return AttemptRefusal(RATE_LIMIT, RATE_LIMIT, "rate limit")
    if code == AUTH:
        # The platform key's "credit balance is too low" is an auth-class refusal (the
        # credential cannot pay); the trail calls it what the operator must fix.
        return AttemptRefusal(AUTH, AUTH, "billing" if BILLING_TEXT.search(detail) else "auth")
    return AttemptRefusal(code, None, _NEVER_WALKS.get(code, code))


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
        and not QUOTA_TEXT.search(detail)
    )
