"""The per-owner names migration, run on agents made before it: each keeps its name as
its runtime key (so a running server keeps its home, socket, work area and container),
and only then may a second owner take the same name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from trinity.crypto import Secret

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("agents", "0008_alter_agent_runtime")]
AFTER = [("agents", "0009_agent_names_per_owner")]


@pytest.fixture
def executor() -> Iterator[MigrationExecutor]:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    yield executor
    latest = MigrationExecutor(connection)
    latest.migrate(latest.loader.graph.leaf_nodes())


def test_existing_agents_keep_their_name_as_their_runtime_key(
    executor: MigrationExecutor,
) -> None:
    apps = executor.loader.project_state(BEFORE).apps
    User = apps.get_model("auth", "User")
    Agent = apps.get_model("agents", "Agent")
    alice = User.objects.create(username="alice")
    bob = User.objects.create(username="bob")
    for name in ("bot", "researcher"):
        Agent.objects.create(name=name, owner=alice, shared_secret=Secret("s"))

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    apps = executor.loader.project_state(AFTER).apps
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
