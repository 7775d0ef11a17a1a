"""Create the first admin on a fresh install and say how to log in.

The password is generated once and kept in var/admin_password (mode 0600); an
existing admin is never changed.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand

from trinity.audit.services import audit_command
from trinity.local_secrets import read_or_create


class Command(BaseCommand):
    help = "Create the admin user if no admin exists, and print how to log in."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--url", default=f"http://127.0.0.1:{settings.PORT}")

    def handle(self, *args: Any, **options: Any) -> None:
        username: str = options["username"]
        password_file = settings.VAR_DIR / "admin_password"
        if not User.objects.filter(is_staff=True).exists():
            password = read_or_create(password_file, lambda: secrets.token_urlsafe(12))
            user = User.objects.create_superuser(username=username, password=password, email="")
            audit_command(
                action="user.create",
                object_type="user",
                object_id=str(user.pk),
                object_label=username,
                changes={"username": [None, username], "is_superuser": [None, True]},
            )
            self.stdout.write(f"created admin user {username!r}")
        url = options["url"]
        if password_file.exists():
            self.stdout.write(
                f"log in at {url}/ as {username!r}; the password is in {password_file}"
            )
        else:
            self.stdout.write(f"log in at {url}/ with your existing admin account")
