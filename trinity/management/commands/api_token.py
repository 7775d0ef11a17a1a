"""Print a user's API token, creating it when missing (``--rotate`` replaces it).

The token goes to stdout only, alone on its line, so a script can capture it:
``TOKEN=$(.venv/bin/python manage.py api_token admin)``. It is never logged.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from trinity import services
from trinity.errors import DomainError


class Command(BaseCommand):
    help = "Print the API token of a user (created when missing); --rotate replaces it."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--rotate", action="store_true", help="replace the token; the old one stops working"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            token = services.api_token_issue(username=options["username"], rotate=options["rotate"])
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(token.key)
