"""Write the panel's tables (``trinity/panel_tables.py``) to
``frontend/src/generated/tables.json``; run it after changing a label or a credential
shape, and commit the file. ``--check`` writes nothing and fails if the file is stale.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from trinity.panel_tables import REGENERATE, TABLES_PATH, panel_tables_json


class Command(BaseCommand):
    help = "Write frontend/src/generated/tables.json from the Python tables the panel reads."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--check", action="store_true", help="fail if the file differs; write nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = settings.BASE_DIR / TABLES_PATH
        text = panel_tables_json()
        if options["check"]:
            current = path.read_text(encoding="utf-8") if path.exists() else ""
            if current != text:
                raise CommandError(f"{TABLES_PATH} is stale: run `{REGENERATE}`")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        self.stdout.write(f"wrote {TABLES_PATH}")
