"""Re-encrypt every stored secret with the newest (first) key.

Rotation: put the new key first in TRINITY_ENCRYPTION_KEYS (keep the old ones after
it), run this command, then drop the old keys. Rows already on the newest key are
left alone, so the command can be re-run after an interruption.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand
from django.db import connection, transaction

from trinity.crypto import EncryptedSecretField, decrypt, encrypt, needs_rotation


class Command(BaseCommand):
    help = "Re-encrypt every encrypted secret with the first TRINITY_ENCRYPTION_KEYS key."

    def handle(self, *args: Any, **options: Any) -> None:
        total = 0
        for model in apps.get_models():
            fields = [f for f in model._meta.concrete_fields if isinstance(f, EncryptedSecretField)]
            for field in fields:
                total += self._rotate(model, field)
        self.stdout.write(f"re-encrypted {total} secret(s) with the newest key")

    def _rotate(self, model: Any, field: EncryptedSecretField) -> int:
        table = connection.ops.quote_name(model._meta.db_table)
        column = connection.ops.quote_name(field.column)
        pk = connection.ops.quote_name(model._meta.pk.column)
        rotated = 0
        # Raw ciphertext, not Secret values: rows already on the newest key are skipped.
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {pk}, {column} FROM {table} WHERE {column} IS NOT NULL")  # noqa: S608
            rows = cursor.fetchall()
        for row_pk, ciphertext in rows:
            if not ciphertext or not needs_rotation(ciphertext):
                continue
            new = encrypt(decrypt(ciphertext))
            # Compare-and-set on the old ciphertext: a token replaced meanwhile wins.
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {table} SET {column} = %s WHERE {pk} = %s AND {column} = %s",  # noqa: S608
                    [new, row_pk, ciphertext],
                )
                rotated += cursor.rowcount
        return rotated
