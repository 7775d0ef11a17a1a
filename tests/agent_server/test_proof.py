"""The health proof helper (trinity_contract/proof.py), as both sides compute it.

A table over secrets and nonces: only the proof of this nonce under this secret
matches; a proof for another nonce (a replay) or under another secret does not.
"""

from __future__ import annotations

import hashlib
import hmac

import pytest

from trinity_contract.proof import (
    LABEL,
    BadNonce,
    health_proof,
    new_nonce,
    proof_matches,
    valid_nonce,
)

SECRET = "agent-shared-secret-0001"
NONCE = "a" * 64
OTHER_NONCE = "b" * 64


def test_the_proof_is_hmac_sha256_of_the_label_and_the_nonce_under_the_secret() -> None:
    # Pinned from first principles: the platform and the server must agree on the bytes.
    expected = hmac.new(
        SECRET.encode(),
        b"trinity.agent-server.health-proof.v1\x00" + NONCE.encode(),
        hashlib.sha256,
    ).hexdigest()
    assert LABEL == b"trinity.agent-server.health-proof.v1"
    assert health_proof(secret=SECRET, nonce=NONCE) == expected


@pytest.mark.parametrize(
    ("signed_with", "signed_nonce", "checked_nonce", "matches"),
    [
        (SECRET, NONCE, NONCE, True),
        ("wrong-secret", NONCE, NONCE, False),  # a server without the agent's secret
        (SECRET + "x", NONCE, NONCE, False),
        (SECRET, OTHER_NONCE, NONCE, False),  # a proof replayed for another nonce
        (SECRET, NONCE[:-1] + "b", NONCE, False),
    ],
)
def test_only_the_proof_of_this_nonce_under_this_secret_matches(
    signed_with: str, signed_nonce: str, checked_nonce: str, matches: bool
) -> None:
    proof = health_proof(secret=signed_with, nonce=signed_nonce)
    assert proof_matches(secret=SECRET, nonce=checked_nonce, proof=proof) is matches


@pytest.mark.parametrize("proof", [None, "", 42, "0" * 64, "A" * 64, "é" * 64, ["x"]])
def test_anything_but_the_proof_is_rejected(proof: object) -> None:
    assert proof_matches(secret=SECRET, nonce=NONCE, proof=proof) is False


def test_an_uppercase_copy_of_the_proof_is_rejected() -> None:
    proof = health_proof(secret=SECRET, nonce=NONCE)
    assert proof_matches(secret=SECRET, nonce=NONCE, proof=proof.upper()) is False


@pytest.mark.parametrize(
    ("nonce", "valid"),
    [
        ("0" * 32, True),  # the shortest accepted
        ("f" * 128, True),  # the longest accepted
        ("0" * 31, False),
        ("f" * 129, False),
        ("A" * 64, False),
        ("g" * 64, False),
        ("", False),
        ("0" * 63 + "\n", False),
    ],
)
def test_a_nonce_is_32_to_128_lowercase_hex_characters(nonce: str, valid: bool) -> None:
    assert valid_nonce(nonce) is valid
    if not valid:
        with pytest.raises(BadNonce):
            health_proof(secret=SECRET, nonce=nonce)
        assert proof_matches(secret=SECRET, nonce=nonce, proof="0" * 64) is False


def test_fresh_nonces_are_valid_and_differ() -> None:
    nonces = {new_nonce() for _ in range(50)}
    assert len(nonces) == 50
    assert all(valid_nonce(nonce) for nonce in nonces)
