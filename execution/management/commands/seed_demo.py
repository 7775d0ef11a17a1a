"""Seed the offline demo that `make run` shows on a fresh machine.

Two subscriptions on the provider simulator (one of them nearly exhausted), one local
agent on the nearly exhausted one, and a printed curl that runs a turn. Idempotent:
re-running keeps what exists and rewrites the simulator's seed file, because the
simulator keeps its state in memory only.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from agents import services as agent_services
from agents.models import Agent
from subscriptions import services as subscription_services
from subscriptions.models import Subscription
from trinity.selectors import api_token_is_live
from trinity.services import api_token_issue

DEMO_PLANS = [
    # (name, plan type, percent of the 5-hour window already used)
    ("demo-max", "max-20x", 12),
    ("demo-pro", "pro", 97),
]
DEMO_AGENT = "demo-agent"


def _write_private(path: Path, content: str) -> None:
    """Write ``content`` atomically, the file 0600 from the moment it exists."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(content)
    os.replace(tmp, path)


class Command(BaseCommand):
    help = "Seed the simulator demo: two subscriptions, one agent, a curl that runs a turn."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--seed-file", default=str(settings.VAR_DIR / "simulator-seed.json"))
        parser.add_argument("--url", default=f"http://127.0.0.1:{settings.PORT}")

    def handle(self, *args: Any, **options: Any) -> None:
        admin = User.objects.filter(is_staff=True).order_by("pk").first()
        if admin is None:
            raise CommandError("no admin user: run `manage.py ensure_admin` first")
        seed: list[dict[str, Any]] = []
        for name, plan_type, used in DEMO_PLANS:
            subscription = Subscription.objects.filter(name=name).first()
            if subscription is None:
                token = "sk-ant-oat01-demo-" + secrets.token_urlsafe(32)
                subscription, _ = subscription_services.subscription_register(
                    name=name, provider="anthropic", plan_type=plan_type, token=token
                )
            seed.append(
                {
                    "token": subscription.token.reveal(),
                    "kind": "oauth",
                    "label": name,
                    "plan_type": plan_type,
                    "usage": {"five_hour": used},
                }
            )
        _write_private(Path(options["seed_file"]), json.dumps(seed))

        agent = Agent.objects.filter(name=DEMO_AGENT).first()
        if agent is None:
            agent = agent_services.agent_create(
                owner=admin, name=DEMO_AGENT, runtime="claude-code", model="", auto_assign=False
            )
            nearly_exhausted = Subscription.objects.get(name="demo-pro")
            subscription_services.assignment_set(agent=agent, subscription_id=nearly_exhausted.pk)
        # The database keeps only a digest of a token: the key lives in this file, and a
        # re-run keeps it while it still signs in (else a new one replaces it).
        token_file = settings.VAR_DIR / "admin_api_token"
        kept = token_file.read_text().strip() if token_file.exists() else ""
        if not kept or not api_token_is_live(key=kept, user=admin):
            issued = api_token_issue(username=admin.get_username())
            _write_private(token_file, issued.key + "\n")
        self.stdout.write(
            "demo: subscriptions demo-max (12% of 5h used) and demo-pro (97%) on the simulator "
            f"at {settings.TRINITY_ANTHROPIC_BASE_URL}; agent {DEMO_AGENT!r} on demo-pro. "
            "Run a turn with:\n"
            f"  curl -s -X POST {options['url']}/api/agents/{DEMO_AGENT}/task "
            f'-H "Authorization: Token $(cat {token_file})" '
            "-H 'Content-Type: application/json' -d '{\"message\": \"say hi\"}'"
        )
