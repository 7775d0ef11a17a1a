"""``manage.py gateway_key create --owner NAME --name LABEL [...]``: issue a gateway
key and print it (shown this once: the database keeps its digest);
``manage.py gateway_key revoke --owner NAME --name LABEL``: revoke one."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from gateway.keys import gateway_key_create, gateway_key_revoke
from gateway.models import GatewayKey
from trinity import clock
from trinity.audit.services import audit_command
from trinity.errors import DomainError


class Command(BaseCommand):
    help = "Create (printing the key once) or revoke a person's gateway key."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("action", choices=["create", "revoke"])
        parser.add_argument("--owner", required=True, help="the username the key is for")
        parser.add_argument("--name", required=True, help="the key's name (unique per owner)")
        parser.add_argument("--expires-in-days", type=int)
        parser.add_argument("--providers", default="", help="comma-separated; empty: all")
        parser.add_argument("--families", default="", help="comma-separated; empty: all")
        parser.add_argument("--rpm", type=int, help="requests per minute")
        parser.add_argument("--streams", type=int, help="concurrent streams")
        parser.add_argument("--daily-tokens", type=int)
        parser.add_argument("--monthly-tokens", type=int)
        parser.add_argument("--daily-usd", type=Decimal)
        parser.add_argument("--monthly-usd", type=Decimal)

    def handle(self, *args: Any, **options: Any) -> None:
        owner = User.objects.filter(username=options["owner"]).first()
        if owner is None:
            raise CommandError(f"no user {options['owner']!r}")
        now = clock.now()
        if options["action"] == "revoke":
            row = GatewayKey.objects.filter(owner=owner, name=options["name"]).first()
            if row is None:
                raise CommandError(f"{owner.username!r} has no gateway key {options['name']!r}")
            gateway_key_revoke(key=row, now=now)
            audit_command(
                action="gateway_key.delete",
                object_type="gateway_key",
                object_id=str(row.pk),
                object_label=row.name,
            )
            self.stdout.write(f"revoked gateway key {row.name!r} ({row.prefix}…)")
            return
        days = options["expires_in_days"]
        try:
            issued = gateway_key_create(
                owner=owner,
                created_by=owner,
                name=options["name"],
                now=now,
                expires_at=now + timedelta(days=days) if days else None,
                providers=_words(options["providers"]),
                model_families=_words(options["families"]),
                requests_per_minute=options["rpm"],
                max_streams=options["streams"],
                daily_tokens=options["daily_tokens"],
                monthly_tokens=options["monthly_tokens"],
                daily_usd=options["daily_usd"],
                monthly_usd=options["monthly_usd"],
            )
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        audit_command(
            action="gateway_key.create",
            object_type="gateway_key",
            object_id=str(issued.row.pk),
            object_label=issued.row.name,
            changes={"owner": [None, owner.pk], "name": [None, issued.row.name]},
        )
        self.stdout.write(issued.key)


def _words(value: str) -> list[str]:
    return [word.strip() for word in value.split(",") if word.strip()]
