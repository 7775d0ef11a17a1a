"""The pure rules over a provider's claims, as tables."""

from __future__ import annotations

from typing import Any

import pytest

from trinity.sso.claims import (
    admin_verdict,
    base_username,
    id_token_problem,
    username_candidates,
)
from trinity.sso.config import check_discovery_url, discovery_document_url, expected_issuer

ISSUER = "https://id.example.test/realms/team"


@pytest.mark.parametrize(
    ("claims", "username"),
    [
        ({"preferred_username": "alice", "email": "a@x.test", "sub": "1"}, "alice"),
        ({"preferred_username": "  ", "email": "a@x.test", "sub": "1"}, "a@x.test"),
        ({"sub": "f1e2-d3"}, "f1e2-d3"),
        ({"preferred_username": "Ann Lee/ops"}, "Ann_Lee_ops"),
        ({"preferred_username": "x" * 200}, "x" * 142),
        ({}, ""),
    ],
)
def test_base_username(claims: dict[str, Any], username: str) -> None:
    assert base_username(claims) == username


def test_username_candidates_skip_the_break_glass_names() -> None:
    names = list(username_candidates("admin", reserved=frozenset({"admin", "admin-2"})))
    assert names[:2] == ["admin-3", "admin-4"]
    assert names[-1] == "admin-50"


@pytest.mark.parametrize(
    ("groups", "admin_group", "verdict"),
    [
        (["ops", "trinity-admins"], "trinity-admins", True),
        ("trinity-admins", "trinity-admins", True),
        (["ops"], "trinity-admins", False),
        (None, "trinity-admins", False),  # a missing claim shows no membership
        ([1, {"x": 1}], "trinity-admins", False),
        (["trinity-admins"], "", None),  # no admin group configured: leave it alone
    ],
)
def test_admin_verdict(groups: Any, admin_group: str, verdict: bool | None) -> None:
    assert admin_verdict(groups, admin_group) is verdict


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"iss": ISSUER, "aud": "trinity", "sub": "1"}, ""),
        ({"iss": ISSUER + "/", "aud": ["trinity"], "sub": "1"}, ""),
        ({"iss": ISSUER, "aud": ["trinity", "other"], "azp": "trinity", "sub": "1"}, ""),
        ({"iss": "https://evil.test", "aud": "trinity", "sub": "1"}, "issuer"),
        ({"iss": ISSUER, "aud": "other", "sub": "1"}, "not meant for this client"),
        ({"iss": ISSUER, "aud": ["trinity", "other"], "azp": "other", "sub": "1"}, "party"),
        ({"iss": ISSUER, "aud": "trinity", "sub": ""}, "no subject"),
    ],
)
def test_id_token_problem(payload: dict[str, Any], problem: str) -> None:
    found = id_token_problem(payload, issuer=ISSUER, client_id="trinity")
    assert (found == "") if problem == "" else (problem in found)


@pytest.mark.parametrize(
    ("raw", "document"),
    [
        (ISSUER, ISSUER + "/.well-known/openid-configuration"),
        (ISSUER + "/", ISSUER + "/.well-known/openid-configuration"),
        (
            ISSUER + "/.well-known/openid-configuration",
            ISSUER + "/.well-known/openid-configuration",
        ),
    ],
)
def test_the_discovery_document_and_its_issuer(raw: str, document: str) -> None:
    assert discovery_document_url(raw) == document
    assert expected_issuer(document) == ISSUER


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://id.example.test", True),
        ("http://127.0.0.1:9000/o", True),
        ("http://localhost:9000/o", True),
        ("http://id.example.test", False),
        ("ftp://id.example.test", False),
        ("https://", False),
    ],
)
def test_check_discovery_url(url: str, allowed: bool) -> None:
    from django.core.exceptions import ImproperlyConfigured

    if allowed:
        check_discovery_url(url)
    else:
        with pytest.raises(ImproperlyConfigured):
            check_discovery_url(url)
