from __future__ import annotations

import logging
from typing import Any

from django.apps import AppConfig

logger = logging.getLogger(__name__)


def _tighten_sqlite_files(sender: Any, connection: Any, **kwargs: Any) -> None:
    """On each new SQLite connection: its file and journals 0600 (see settings)."""
    if connection.vendor != "sqlite":
        return
    from trinity.local_secrets import tighten_sqlite_files

    tightened = tighten_sqlite_files(str(connection.settings_dict["NAME"]))
    if tightened:
        logger.warning("tightened to mode 0600: %s", ", ".join(tightened))


class TrinityConfig(AppConfig):
    name = "trinity"
    verbose_name = "Trinity platform"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.backends.signals import connection_created

        from trinity.api import strict_input_fields

        strict_input_fields()
        connection_created.connect(_tighten_sqlite_files, dispatch_uid="trinity-sqlite-modes")
        if settings.VAR_DIR_TIGHTENED:
            # Once: the next process finds nothing left to tighten.
            logger.warning(
                "%s was readable by other local users; tightened to 0700 (directory) and "
                "0600 (files): %s",
                settings.VAR_DIR,
                ", ".join(settings.VAR_DIR_TIGHTENED),
            )
