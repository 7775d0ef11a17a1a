"""The refusal-text patterns, one set for both sides.

The agent server reads the Claude Code CLI's error sentence when the CLI reports no
HTTP status (``agent_server/classifier.py``); the platform reads an answer's detail
when its code is off contract (``routing/attempt_refusal.py``) and tells a throttle
from an exhausted plan by it. Both read these compiled patterns, in the order of
``error_code_from_text``, so what one side calls a rate limit the other does too.

The set follows how the real CLI words each upstream refusal
(``docs/flows/agent-server.md``, "CLI behaviour observed here"): 429 "You've hit your limit ·
resets 4:10am (UTC)" (also "your session limit", "your 5-hour limit", "your weekly
limit", "your Opus limit"), 401/403 "Failed to authenticate. API Error: 401 …", 400
"Credit balance is too low", 404 "There's an issue with the selected model (…)"; the
direct Messages-API runtime passes the provider's "<type>: <message>".
"""

from __future__ import annotations

import re
from typing import Final

from trinity_contract.errors import ErrorCode

# The window's name between "your" and "limit" is UI copy: "session" (CLI 2.1.197),
# "5-hour" (2.1.332), "weekly", a model family. Any one hyphenated word is accepted.
_LIMIT_SENTENCE = r"hit your (?:[\w-]+ )?limit"

RATE_LIMIT_TEXT: Final = re.compile(
    _LIMIT_SENTENCE + r"|usage limit|rate[ _-]?limit|quota exceeded|\b429\b", re.IGNORECASE
)
# A credential that cannot pay: an auth-class refusal the trail calls ``billing``.
BILLING_TEXT: Final = re.compile(
    r"credit balance is too low|billing|payment required", re.IGNORECASE
)
# No bare "401", "403" or "unauthorized": the CLI words every credential refusal as
# "Failed to authenticate. API Error: 40x …", and "unauthorized" is also what an
# agent server says of the platform's own secret, which says nothing about the
# turn's credential and must never be recorded against it.
AUTH_TEXT: Final = re.compile(
    r"failed to authenticate|not logged in|invalid api key|invalid x-api-key"
    r"|oauth token has expired|token (?:has been )?revoked|authentication_error"
    r"|permission_error|invalid bearer token",
    re.IGNORECASE,
)
MODEL_TEXT: Final = re.compile(
    r"issue with the selected model|not_found_error|model .*(?:not found|does not exist)",
    re.IGNORECASE,
)
# Words only a usage-limit refusal carries (the CLI's "You've hit your limit", the
# API's "usage limit"); a bare 429 or "rate_limit_error" is no quota evidence, and
# neither is the CLI's throttle sentence, "Server is temporarily limiting requests
# (not your usage limit)".
QUOTA_TEXT: Final = re.compile(
    _LIMIT_SENTENCE + r"|(?<!not your )usage limit|quota exceeded", re.IGNORECASE
)
# Signs that the process was killed (a signal, a shell-encoded 137/143, the OOM killer).
KILL_TEXT: Final = re.compile(
    r"\bSIG(?:KILL|TERM)\b|\b(?:exit(?:ed)?|status|code)\D{0,12}(?:137|143)\b"
    r"|out of memory|\bOOM\b|oom[-_ ]?kill",
    re.IGNORECASE,
)


def error_code_from_text(text: str) -> ErrorCode:
    """The error code a refusal's text alone says: ``rate_limit``, ``auth`` (a billing
    refusal included), ``model_unsupported``, else ``upstream_error`` (which never
    walks), checked in that order."""
    if RATE_LIMIT_TEXT.search(text):
        return "rate_limit"
    if BILLING_TEXT.search(text) or AUTH_TEXT.search(text):
        return "auth"
    if MODEL_TEXT.search(text):
        return "model_unsupported"
    return "upstream_error"
