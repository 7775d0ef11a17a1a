"""What the platform and the agent server both read of a ChatGPT/Codex plan: its
windows, named by their length, and the account its sign-in's JWTs carry.

Pure. The JWTs are decoded, never verified: the provider verifies them; both sides
only read which account a token names (the ``chatgpt-account-id`` it goes with).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Final

# A window's name is its length, never "primary"/"secondary": which one is primary is
# the provider's choice and has changed before.
WINDOW_NAMES: Final = {5 * 3600: "five_hour", 7 * 86400: "seven_day"}
# The claim namespace the ChatGPT sign-in's JWTs carry their account under.
AUTH_CLAIMS: Final = "https://api.openai.com/auth"
ACCOUNT_CLAIM: Final = "chatgpt_account_id"


def window_name(seconds: int) -> str:
    """``five_hour``, ``seven_day``, else ``window_<seconds>s``."""
    return WINDOW_NAMES.get(seconds, f"window_{seconds}s")


def jwt_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, unverified; {} when ``token`` is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    padded = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (binascii.Error, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def claimed_account(*tokens: str) -> str:
    """The ChatGPT account the first of ``tokens`` that names one names, else ""."""
    for token in tokens:
        auth = jwt_claims(token).get(AUTH_CLAIMS)
        account = auth.get(ACCOUNT_CLAIM) if isinstance(auth, dict) else None
        if isinstance(account, str) and account.strip():
            return account.strip()
    return ""
