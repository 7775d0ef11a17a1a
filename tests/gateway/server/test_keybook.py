"""The key poll: a change whose commit came after a poll, stamped with an instant that
poll already passed, is still read by the next one (a missed revocation would leave
the key serving in the gateway process)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from gateway.keys import gateway_key_create
from gateway.models import GatewayKey
from gateway.server.keybook import (
    OWNER_INACTIVE,
    REVOKED,
    KeyBook,
    read_by_digest,
    read_changed,
    read_poll,
)
from trinity import clock

pytestmark = pytest.mark.django_db


def test_a_revocation_stamped_before_the_last_poll_is_read_by_the_next() -> None:
    owner = User.objects.create_user("dev")
    issued = gateway_key_create(owner=owner, created_by=owner, name="laptop", now=clock.now())
    book = KeyBook()
    book.apply(*read_changed(None), on_revoked=lambda key_id, why: None)
    digest, _, answered = book.cached(issued.key)
    assert not answered  # a poll fills no cache: the key's first request reads it
    book.learn(digest, read_by_digest(digest))
    policy = book.known[digest]
    assert not policy.revoked
    polled_at = book.since
    assert polled_at is not None
    # Revoked by a transaction that stamped its instant just before that poll's newest
    # change and committed after the poll.
    late = polled_at - timedelta(seconds=1)
    GatewayKey.objects.filter(pk=issued.row.pk).update(revoked_at=late, updated_at=late)
    ended: list[tuple[int, str]] = []

    book.apply(*read_changed(book.since), on_revoked=lambda *end: ended.append(end))

    assert book.known[digest].revoked
    assert ended == [(issued.row.pk, REVOKED)]


def test_a_deactivated_owners_key_is_refused_at_the_next_poll_and_its_streams_end() -> None:
    owner = User.objects.create_user("dev")
    issued = gateway_key_create(owner=owner, created_by=owner, name="laptop", now=clock.now())
    book = KeyBook()
    digest, _, _ = book.cached(issued.key)
    book.learn(digest, read_by_digest(digest))
    assert book.known[digest].refusal(clock.now()) == ""
    # Deactivated without touching the key (as the admin or a script does it).
    User.objects.filter(pk=owner.pk).update(is_active=False)
    ended: list[tuple[int, str]] = []

    def end(key_id: int, why: str) -> None:
        ended.append((key_id, why))

    changed, newest, inactive = read_poll(book.since)
    book.apply(changed, newest, end)
    book.apply_owner_inactive(inactive, end)

    assert book.known[digest].refusal(clock.now()) == OWNER_INACTIVE
    assert ended == [(issued.row.pk, OWNER_INACTIVE)]
    # Read afresh (another process's first request), it is refused at once.
    fresh = read_by_digest(digest)
    assert fresh is not None and not fresh.owner_active
    # Active again: admitted again at the next poll, with nothing more ended.
    User.objects.filter(pk=owner.pk).update(is_active=True)
    book.apply_owner_inactive(read_poll(book.since)[2], end)
    assert book.known[digest].refusal(clock.now()) == ""
    assert ended == [(issued.row.pk, OWNER_INACTIVE)]
