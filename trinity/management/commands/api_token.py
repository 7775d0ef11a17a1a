"""Issue a user's API token and print it (``--rotate`` revokes their others first).

The database keeps only a digest of the token, so this is the one time it is shown: it
goes to stdout only, alone on its line, so a script can capture it:
``TOKEN=$(.venv/bin/python manage.py api_token admin)``. It is never logged. Each call
issues a new token; earlier ones keep working until they expire, are rotated away or
deleted in Django admin.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from trinity import services
from trinity.audit.services import audit_command
from trinity.errors import DomainError


class Command(BaseCommand):
    help = "Issue an API token for a user and print it (shown once); --rotate revokes the rest."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--rotate", action="store_true", help="revoke the user's other tokens first"
        )
        parser.add_argument(
            "--expires-in-days",
            type=int,
            default=None,
            help="days until it expires (default: TRINITY_API_TOKEN_TTL_DAYS; 0 there: never)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["expires_in_days"]
        if days is not None and not 1 <= days <= 3650:
            raise CommandError("--expires-in-days must be between 1 and 3650")
        try:
            issued = services.api_token_issue(
                username=options["username"],
                rotate=options["rotate"],
                expires_in=timedelta(days=days) if days is not None else None,
            )
        except DomainError as exc:
            raise CommandError(exc.message) from None
        audit_command(
            action="api_token.create",
            object_type="api_token",
            object_id=f"{issued.token.token_key[:8]}…",
            object_label=options["username"],
            changes={"user": [None, issued.token.user_id], "rotate": [None, options["rotate"]]},
        )
        self.stdout.write(issued.key)
