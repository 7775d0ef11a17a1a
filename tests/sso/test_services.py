"""A verified sign-in becomes an account: once per subject, even when it races."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from trinity import clock
from trinity.sso.models import SsoIdentity
from trinity.sso.services import sso_identity_sign_in

ISSUER = "https://id.example.test"


@pytest.mark.django_db(transaction=True)
def test_two_first_sign_ins_of_one_person_at_once_make_one_account(settings: Any) -> None:
    settings.TRINITY_OIDC_ADMIN_GROUP = ""
    claims = {"sub": "s-1", "preferred_username": "gina"}
    start = threading.Barrier(2)
    users: list[int] = []

    def sign_in() -> None:
        try:
            start.wait(5)
            users.append(sso_identity_sign_in(issuer=ISSUER, claims=claims, now=clock.now()).pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=sign_in) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(users) == 2 and users[0] == users[1]
    assert list(User.objects.values_list("username", flat=True)) == ["gina"]
    assert SsoIdentity.objects.count() == 1


@pytest.mark.django_db
def test_an_admin_group_left_unset_leaves_the_admin_flag_alone(settings: Any) -> None:
    settings.TRINITY_OIDC_ADMIN_GROUP = ""
    user = sso_identity_sign_in(
        issuer=ISSUER, claims={"sub": "s-2", "preferred_username": "hal"}, now=clock.now()
    )
    User.objects.filter(pk=user.pk).update(is_staff=True)  # made admin by hand
    again = sso_identity_sign_in(issuer=ISSUER, claims={"sub": "s-2"}, now=clock.now())
    assert again.is_staff


@pytest.mark.django_db
def test_the_same_subject_at_another_issuer_is_another_person(settings: Any) -> None:
    first = sso_identity_sign_in(
        issuer=ISSUER, claims={"sub": "s-3", "preferred_username": "ivy"}, now=clock.now()
    )
    other = sso_identity_sign_in(
        issuer="https://other.example.test",
        claims={"sub": "s-3", "preferred_username": "ivy"},
        now=clock.now(),
    )
    assert (first.username, other.username) == ("ivy", "ivy-2")
