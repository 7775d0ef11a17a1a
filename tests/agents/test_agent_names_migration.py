"""The per-owner names migration, run on agents made before it: each keeps its name as
its runtime key (so a running server keeps its home, socket, work area and container),
and only then may a second owner take the same name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.apps.registry import Apps
from django.db import IntegrityError, transaction

from tests.migrations import migrate, migrated
from trinity.crypto import Secret

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("agents", "0008_alter_agent_runtime")]
AFTER = [("agents", "0009_agent_names_per_owner")]


@pytest.fixture
def before() -> Iterator[Apps]:
    with migrated(BEFORE) as apps:
        yield apps


def test_existing_agents_keep_their_name_as_their_runtime_key(
    before: Apps,
) -> None:
    apps = before
    User = apps.get_model("auth", "User")
    Agent = apps.get_model("agents", "Agent")
    alice = User.objects.create(username="alice")
    bob = User.objects.create(username="bob")
    for name in ("bot", "researcher"):
        Agent.objects.create(name=name, owner=alice, shared_secret=Secret("s"))

    apps = migrate(AFTER)
    Agent = apps.get_model("agents", "Agent")
    assert dict(Agent.objects.values_list("name", "runtime_key")) == {
        "bot": "bot",
        "researcher": "researcher",
    }
    # Now a name is per owner, and a runtime key stays everyone's own.
    Agent.objects.create(name="bot", owner_id=bob.pk, runtime_key="bot-2", shared_secret="x")
    with pytest.raises(IntegrityError), transaction.atomic():
        Agent.objects.create(name="bot", owner_id=alice.pk, runtime_key="b3", shared_secret="x")
    with pytest.raises(IntegrityError), transaction.atomic():
        Agent.objects.create(name="other", owner_id=bob.pk, runtime_key="bot", shared_secret="x")
