"""The data-migration tests' one way to move the test database through the history:
to a point of it (the models as they were there), and back to the latest afterwards,
which every other test expects."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

Targets = list[tuple[str, str]]


def migrate(targets: Targets) -> Apps:
    """Migrate the test database to ``targets`` (forwards or backwards); the models as
    they are there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@contextlib.contextmanager
def migrated(targets: Targets) -> Iterator[Apps]:
    """The schema at ``targets`` for the block (its models yielded), then the latest."""
    try:
        yield migrate(targets)
    finally:
        latest = MigrationExecutor(connection)
        latest.migrate(latest.loader.graph.leaf_nodes())
