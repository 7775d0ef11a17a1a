"""Sign-in through a real OpenID provider (django-oauth-toolkit in its own process),
over HTTP: accounts by subject, admin by group, sign-out, and what deactivation ends.

The platform is the live test server; the provider runs the code flow with PKCE and
signs ID tokens with RS256 (tests/sso/provider.py).
"""

from __future__ import annotations

import httpx
import pytest
from django.contrib.auth.models import User
from knox.models import AuthToken

from gateway.keys import gateway_key_create, key_digest
from gateway.server.keybook import read_by_digest
from tests.sso.flow import csrf_post, sso_sign_in
from tests.sso.provider import ADMINS, IdentityProvider
from trinity import clock
from trinity.audit.models import AuditEntry
from trinity.sso.models import SsoIdentity

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PASSWORD = "idp-pw-for-tests"


def me(client: httpx.Client, base: str) -> httpx.Response:
    return client.get(f"{base}/api/auth/me")


def test_a_first_sign_in_creates_the_account_and_a_renamed_person_keeps_it(
    sso: IdentityProvider, live_server: object
) -> None:
    base = str(live_server)
    subject = sso.user("alice", password=PASSWORD, email="alice@example.test", groups=[])

    client, landed = sso_sign_in(base, "alice", PASSWORD)

    assert landed == f"{base}/"
    assert me(client, base).json() == {"username": "alice", "is_admin": False}
    identity = SsoIdentity.objects.select_related("user").get(subject=subject)
    assert identity.issuer == sso.issuer
    assert identity.user.email == "alice@example.test"
    assert not identity.user.has_usable_password()
    # Renamed at the provider: the same subject, so the same account.
    sso.user("alice", rename_to="alice.cooper")
    client, _ = sso_sign_in(base, "alice.cooper", PASSWORD)
    assert me(client, base).json()["username"] == "alice"
    assert User.objects.filter(sso_identities__subject=subject).count() == 1


def test_a_local_account_of_the_same_name_is_never_taken_over(
    sso: IdentityProvider, live_server: object
) -> None:
    base = str(live_server)
    local = User.objects.create_user("bob", password="local-pw")
    sso.user("bob", password=PASSWORD, groups=[ADMINS])

    client, _ = sso_sign_in(base, "bob", PASSWORD)

    assert me(client, base).json() == {"username": "bob-2", "is_admin": True}
    local.refresh_from_db()
    assert not local.is_staff and not local.sso_identities.exists()


def test_the_admin_group_makes_an_admin_and_leaving_it_unmakes_one_at_next_sign_in(
    sso: IdentityProvider, live_server: object
) -> None:
    base = str(live_server)
    sso.user("carol", password=PASSWORD, groups=[ADMINS, "dev"])

    client, _ = sso_sign_in(base, "carol", PASSWORD)
    assert me(client, base).json() == {"username": "carol", "is_admin": True}
    assert client.get(f"{base}/api/notification-channels").status_code == 200  # admins only

    sso.user("carol", groups=["dev"])
    client, _ = sso_sign_in(base, "carol", PASSWORD)
    assert me(client, base).json() == {"username": "carol", "is_admin": False}
    assert client.get(f"{base}/api/notification-channels").status_code == 403
    carol = User.objects.get(username="carol")
    assert not carol.is_staff
    # The audit log says who made carol an admin and who took it back: the platform,
    # following the provider's claims, each before that sign-in's own entry.
    entries = AuditEntry.objects.filter(object_type="user", object_id=str(carol.pk))
    assert [
        (e.action, e.actor_kind, e.source, e.changes.get("is_staff"))
        for e in entries.order_by("id")
    ] == [
        ("user.create", "system", "system", [False, True]),
        ("sign_in", "user", "panel", None),
        ("user.update", "system", "system", [True, False]),
        ("sign_in", "user", "panel", None),
    ]


def test_sign_out_ends_the_session_and_offers_the_providers_end_session(
    sso: IdentityProvider, live_server: object
) -> None:
    base = str(live_server)
    sso.user("dave", password=PASSWORD, groups=[])
    client, _ = sso_sign_in(base, "dave", PASSWORD)
    assert me(client, base).status_code == 200

    answer = csrf_post(client, f"{base}/api/auth/logout")

    assert answer.status_code == 200
    end_session = httpx.URL(answer.json()["end_session_url"])
    assert str(end_session).startswith(f"{sso.issuer}/logout/")
    assert end_session.params["post_logout_redirect_uri"] == f"{base}/"
    assert me(client, base).status_code == 401
    # The provider accepts it: it asks to confirm the sign-out there.
    assert client.get(str(end_session)).status_code == 200


def test_an_sso_users_api_token_and_gateway_key_work_until_the_account_is_deactivated(
    sso: IdentityProvider, live_server: object
) -> None:
    base = str(live_server)
    sso.user("erin", password=PASSWORD, groups=[])
    client, _ = sso_sign_in(base, "erin", PASSWORD)
    user = User.objects.get(username="erin")
    _, token = AuthToken.objects.create(user=user)
    issued = gateway_key_create(owner=user, created_by=user, name="laptop", now=clock.now())
    by_token = {"Authorization": f"Token {token}"}
    assert httpx.get(f"{base}/api/agents", headers=by_token).status_code == 200
    assert read_by_digest(key_digest(issued.key)).refusal(clock.now()) == ""  # type: ignore[union-attr]

    User.objects.filter(pk=user.pk).update(is_active=False)

    refused = httpx.get(f"{base}/api/agents", headers=by_token)
    assert refused.status_code == 401
    assert refused.json()["detail"] == "User inactive or deleted."
    policy = read_by_digest(key_digest(issued.key))
    assert (
        policy is not None
        and policy.refusal(clock.now()) == "this gateway key's owner is deactivated"
    )
    # The session the provider started ends too, and signing in again is refused.
    assert me(client, base).status_code == 401
    _, landed = sso_sign_in(base, "erin", PASSWORD)
    assert landed == f"{base}/?sso_error=inactive"


def test_a_refusal_at_the_provider_lands_on_the_panel_with_an_error(
    sso: IdentityProvider, live_server: object
) -> None:
    base = str(live_server)
    answer = httpx.get(f"{base}/oidc/callback/?error=access_denied&state=x")
    assert (answer.status_code, answer.headers["location"]) == (302, "/?sso_error=denied")
    forged = httpx.get(f"{base}/oidc/callback/?code=made-up&state=never-issued")
    assert (forged.status_code, forged.headers["location"]) == (302, "/?sso_error=failed")
