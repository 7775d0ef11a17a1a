"""The health proof: an agent server shows it holds the per-agent secret.

Before the platform sends the bearer secret, a prompt or an ``auth_override`` to an
endpoint, it asks ``GET /health?nonce=<hex>`` with a nonce it just chose, and the
server answers ``proof = HMAC-SHA256(secret, LABEL || 0x00 || nonce)``. A process
that merely answers on the endpoint (one that bound the port or the socket first)
cannot compute it; a proof recorded for one nonce is worth nothing for the next.

Part of the shared contract package both sides import: the agent server (which
imports nothing from the Django side) and ``agents/client.py``. Standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Final

# Domain separation: the key signs nothing else with this label, so a proof can never
# be replayed as (or derived from) any other use of the secret.
LABEL: Final = b"trinity.agent-server.health-proof.v1"
NONCE_BYTES: Final = 32
# A nonce is lowercase hex of 16..64 bytes; anything else is refused unsigned.
_NONCE = re.compile(r"[0-9a-f]{32,128}")


class BadNonce(ValueError):
    """The nonce is not 32..128 lowercase hex characters."""


def new_nonce() -> str:
    """A fresh random nonce (64 hex characters)."""
    return secrets.token_hex(NONCE_BYTES)


def valid_nonce(nonce: str) -> bool:
    return _NONCE.fullmatch(nonce) is not None


def health_proof(*, secret: str, nonce: str) -> str:
    """The hex HMAC-SHA256 of ``nonce`` under ``secret``; raises BadNonce."""
    if not valid_nonce(nonce):
        raise BadNonce("the nonce must be 32..128 lowercase hex characters")
    message = LABEL + b"\x00" + nonce.encode("ascii")
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def proof_matches(*, secret: str, nonce: str, proof: object) -> bool:
    """Whether ``proof`` is the proof of ``nonce`` under ``secret`` (constant time).

    False for anything that is not a string, and for an invalid nonce.
    """
    if not isinstance(proof, str) or not valid_nonce(nonce):
        return False
    expected = health_proof(secret=secret, nonce=nonce)
    return hmac.compare_digest(proof.encode("ascii", "replace"), expected.encode("ascii"))
