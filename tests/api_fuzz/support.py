"""What the API fuzz and the hostile-value table share."""

from __future__ import annotations

from django.db import connection


def database_fingerprint() -> dict[str, str]:
    """Every table's row count and, on Postgres, a checksum of every row."""
    # Table names come from the database's own catalogue, never from a request.
    tables = sorted(connection.introspection.table_names())
    quote = connection.ops.quote_name
    if connection.vendor == "postgresql":
        parts = [
            f"SELECT '{name}', count(*)::text || ':' || "  # noqa: S608 - catalogue names
            f"md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {quote(name)} t"
            for name in tables
        ]
    else:
        parts = [f"SELECT '{name}', count(*) FROM {quote(name)}" for name in tables]  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts))
        return {name: str(value) for name, value in cursor.fetchall()}
