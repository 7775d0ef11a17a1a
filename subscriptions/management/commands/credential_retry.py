"""``manage.py credential_retry (--subscription NAME | --platform-key |
--openai-platform-key) [--actor WHO]``:
an admin's "retry now" from a shell: clear a credential's refusals (a subscription is
probed for a fresh reading too) and audit who did it, as the panel and
``POST /api/subscriptions/{id}/retry`` / ``POST /api/settings/platform-api-key/retry``
(``…/platform-api-key/openai-codex/retry`` for the OpenAI key) do.
"""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing import providers
from routing.providers import ANTHROPIC
from subscriptions.models import Subscription
from subscriptions.retry import RetryResult, platform_key_retry_now, subscription_retry_now
from trinity import clock
from trinity.audit.services import audit_command
from trinity.errors import Conflict


class Command(BaseCommand):
    help = "Retry a credential now: clear its refusals (and probe a subscription)."

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--subscription", help="the subscription's name")
        which.add_argument(
            "--platform-key", action="store_true", help="the (Anthropic) platform API key"
        )
        which.add_argument(
            "--openai-platform-key", action="store_true", help="the OpenAI platform key"
        )
        parser.add_argument(
            "--actor", default="", help="who retries, for the audit (default: the OS user)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        actor = options["actor"] or f"{getpass.getuser()} (manage.py)"
        now = clock.now()
        if options["platform_key"] or options["openai_platform_key"]:
            provider = providers.OPENAI if options["openai_platform_key"] else ANTHROPIC
            try:
                result = platform_key_retry_now(actor=actor, now=now, provider=provider)
            except Conflict as exc:
                raise CommandError(str(exc)) from None
        else:
            subscription = Subscription.objects.filter(name=options["subscription"]).first()
            if subscription is None:
                raise CommandError(f"No subscription named {options['subscription']!r}.")
            result = subscription_retry_now(subscription=subscription, actor=actor, now=now)
        audit_command(
            action=f"{result.credential}.retry",
            object_type=result.credential,
            object_label=result.name,
            changes={"refusals_cleared": [None, result.cleared]},
        )
        self.stdout.write(_line(result))


def _line(result: RetryResult) -> str:
    probe = f"; probe: {result.probe}" if result.probe else ""
    return f"{result.name} (…{result.fingerprint}): {result.cleared} refusal(s) cleared{probe}"
