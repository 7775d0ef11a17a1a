"""API tokens move from DRF's authtoken (the key in plaintext) to knox (a digest).

Every key in ``authtoken_token`` is stored as knox stores a key it issued (its SHA-512
digest and its first 15 characters), so a client holding an old key keeps signing in
with the same ``Authorization: Token <key>`` header. Then the plaintext table is dropped
(and authtoken's migration records, so the app could be installed again cleanly). On a
database that never had authtoken this does nothing. Not reversible: the keys are gone.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from knox.crypto import hash_token
from knox.settings import CONSTANTS

LEGACY_TABLE = "authtoken_token"


def keep_legacy_tokens_as_digests(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    if LEGACY_TABLE not in connection.introspection.table_names():
        return
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, user_id FROM {LEGACY_TABLE}")  # noqa: S608 - a constant
        rows = cursor.fetchall()
    auth_token = apps.get_model("knox", "AuthToken")
    auth_token.objects.using(connection.alias).bulk_create(
        [
            auth_token(
                digest=hash_token(key),
                token_key=key[: CONSTANTS.TOKEN_KEY_LENGTH],
                user_id=user_id,
                expiry=None,
            )
            for key, user_id in rows
        ],
        ignore_conflicts=True,
    )
    schema_editor.execute(f"DROP TABLE {LEGACY_TABLE}")
    schema_editor.execute("DELETE FROM django_migrations WHERE app = 'authtoken'")


class Migration(migrations.Migration):
    dependencies = [
        ("trinity", "0005_routing_policy_and_key_budgets"),
        ("knox", "0009_extend_authtoken_field"),
    ]

    operations = [
        migrations.RunPython(keep_legacy_tokens_as_digests, migrations.RunPython.noop),
    ]
