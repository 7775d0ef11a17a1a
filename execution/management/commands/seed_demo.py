"""Seed the offline demo that `make run` shows on a fresh machine.

Two Claude subscriptions on the provider simulator (one of them nearly exhausted), one
local Claude Code agent on the nearly exhausted one; a ChatGPT/Codex plan (registered
from an auth.json, as `codex login` writes it) with a Codex CLI agent on it; and a
printed curl for each that runs a turn. Idempotent: re-running keeps what exists and
rewrites the simulator's seed file, because the simulator keeps its state in memory
only.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from agents import services as agent_services
from agents.models import Agent
from gateway.keys import gateway_key_create, key_digest
from gateway.models import GatewayKey
from subscriptions import services as subscription_services
from subscriptions.codex_refresh import codex_tokens
from subscriptions.models import Subscription
from trinity import clock
from trinity.selectors import api_token_is_live
from trinity.services import api_token_issue
from trinity_contract.codex import AUTH_CLAIMS

DEMO_PLANS = [
    # (name, plan type, percent of the 5-hour window already used)
    ("demo-max", "max-20x", 12),
    ("demo-pro", "pro", 97),
]
DEMO_AGENT = "demo-agent"
DEMO_CODEX_PLAN = "demo-codex"
DEMO_CODEX_AGENT = "demo-codex-agent"
DEMO_CODEX_ACCOUNT = "acct-demo-codex"
DEMO_GATEWAY_KEY = "demo"
# The demo's access token outlives any demo; the platform refreshes it when due.
DEMO_CODEX_LIFETIME = 30 * 86400


def _unsigned_jwt(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.{secrets.token_urlsafe(16)}"


def _codex_plan() -> dict[str, Any]:
    """The demo's Codex plan (registered once from an auth.json) and its seed entry."""
    subscription = Subscription.objects.filter(name=DEMO_CODEX_PLAN).first()
    if subscription is None:
        claims: dict[str, Any] = {
            "exp": int(time.time()) + DEMO_CODEX_LIFETIME,
            AUTH_CLAIMS: {"chatgpt_account_id": DEMO_CODEX_ACCOUNT, "chatgpt_plan_type": "pro"},
        }
        tokens = {
            "access_token": _unsigned_jwt(claims),
            "refresh_token": "rt-demo-" + secrets.token_urlsafe(24),
            "account_id": DEMO_CODEX_ACCOUNT,
        }
        subscription, _ = subscription_services.subscription_register(
            name=DEMO_CODEX_PLAN,
            provider="openai-codex",
            plan_type="pro",
            token=json.dumps({"OPENAI_API_KEY": None, "tokens": tokens}),
        )
    credential = codex_tokens(subscription.token)
    return {
        "token": credential.access_token,
        "kind": "codex",
        "label": DEMO_CODEX_PLAN,
        "plan_type": "pro",
        "account_id": credential.account_id,
        "refresh_token": credential.refresh_token,
    }


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
        seed.append(_codex_plan())
        _write_private(Path(options["seed_file"]), json.dumps(seed))

        _demo_agents(admin)
        token_file = _api_token_file(admin)
        gateway_key_file = _demo_gateway_key(admin)
        self.stdout.write(
            "demo: subscriptions demo-max (12% of 5h used) and demo-pro (97%) on the simulator "
            f"at {settings.TRINITY_ANTHROPIC_BASE_URL}; agent {DEMO_AGENT!r} on demo-pro; "
            f"Codex plan {DEMO_CODEX_PLAN!r} with agent {DEMO_CODEX_AGENT!r} (Codex CLI). "
            "Run a turn with:\n"
            + _curl(options["url"], DEMO_AGENT, token_file)
            + "\nand a Codex turn with:\n"
            + _curl(options["url"], DEMO_CODEX_AGENT, token_file)
            + "\nPoint your own Claude Code at the team's pool (the gateway, demo key):\n"
            + f"  export ANTHROPIC_BASE_URL={settings.TRINITY_GATEWAY_URL}\n"
            + f"  export ANTHROPIC_API_KEY=$(cat {gateway_key_file})\n"
            + "then run `claude` as usual (docs/flows/gateway.md; Codex CLI and SDKs there too)."
        )


def _demo_agents(admin: User) -> None:
    """The admin's own demo agents: names are per owner, an operator's namesake is not it."""
    agent = Agent.objects.filter(owner=admin, name=DEMO_AGENT).first()
    if agent is None:
        agent = agent_services.agent_create(
            owner=admin, name=DEMO_AGENT, runtime="claude-code", model="", auto_assign=False
        )
        nearly_exhausted = Subscription.objects.get(name="demo-pro")
        subscription_services.assignment_set(agent=agent, subscription_id=nearly_exhausted.pk)
    if not Agent.objects.filter(owner=admin, name=DEMO_CODEX_AGENT).exists():
        codex = agent_services.agent_create(
            owner=admin,
            name=DEMO_CODEX_AGENT,
            runtime="codex-cli",
            model="gpt-5.5-codex",
            auto_assign=False,
        )
        plan = Subscription.objects.get(name=DEMO_CODEX_PLAN)
        subscription_services.assignment_set(agent=codex, subscription_id=plan.pk)


def _api_token_file(admin: User) -> Path:
    """The admin's API token, in a file: the database keeps only a digest of a token, so
    a re-run keeps it while it still signs in (else a new one replaces it)."""
    token_file = settings.VAR_DIR / "admin_api_token"
    kept = token_file.read_text().strip() if token_file.exists() else ""
    if not kept or not api_token_is_live(key=kept, user=admin):
        issued = api_token_issue(username=admin.get_username())
        _write_private(token_file, issued.key + "\n")
    return token_file


def _demo_gateway_key(admin: User) -> Path:
    """The admin's demo gateway key, in a file (the database keeps only its digest): a
    re-run keeps it while it is live, else issues a new one."""
    key_file = settings.VAR_DIR / "demo_gateway_key"
    kept = key_file.read_text().strip() if key_file.exists() else ""
    live = GatewayKey.objects.filter(
        digest=key_digest(kept), revoked_at__isnull=True, owner=admin
    ).exists()
    if not kept or not live:
        GatewayKey.objects.filter(owner=admin, name=DEMO_GATEWAY_KEY).delete()
        issued = gateway_key_create(
            owner=admin, created_by=admin, name=DEMO_GATEWAY_KEY, now=clock.now()
        )
        _write_private(key_file, issued.key + "\n")
    return key_file


def _curl(url: str, agent: str, token_file: Path) -> str:
    return (
        f"  curl -s -X POST {url}/api/agents/{agent}/task "
        f'-H "Authorization: Token $(cat {token_file})" '
        "-H 'Content-Type: application/json' -d '{\"message\": \"say hi\"}'"
    )
