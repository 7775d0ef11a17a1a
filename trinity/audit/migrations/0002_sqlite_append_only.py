"""On the embedded SQLite default, where django-pgtrigger installs nothing: a trigger
that refuses UPDATE of an audit entry. DELETE stays open there, because Django's test
runner and ``manage.py flush`` empty tables with DELETE on SQLite; the app itself
never deletes but for the retention prune (docs/flows/audit-log.md)."""

from __future__ import annotations

from typing import Any

from django.db import migrations

CREATE = """
CREATE TRIGGER IF NOT EXISTS audit_auditentry_append_only
BEFORE UPDATE ON audit_auditentry
BEGIN
    SELECT RAISE(ABORT, 'audit entries are append-only');
END
"""
DROP = "DROP TRIGGER IF EXISTS audit_auditentry_append_only"


def _on_sqlite(sql: str) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "sqlite":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_audit_entry")]

    operations = [migrations.RunPython(_on_sqlite(CREATE), _on_sqlite(DROP))]
