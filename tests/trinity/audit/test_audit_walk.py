"""Every write operation of the API schema leaves exactly one audit entry, with the
right actor and source, and no secret in it (enumerated from /api/schema/ as the
operator-isolation test does, so a new write endpoint without a row in
``walk_table.ROWS`` fails here)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from knox.models import AuthToken
from rest_framework.test import APIClient

from execution.models import Execution
from execution.schedules.services import schedule_create
from simulator.process import SimulatorProcess
from subscriptions.plan_sign_in.device import plan_device_sign_in_start
from subscriptions.plan_sign_in.flow import plan_sign_in_start
from subscriptions.plan_sign_in.providers import SignInProvider
from tests.agents.factories import AgentFactory, UserFactory
from tests.conftest import platform_on
from tests.gateway.factories import GatewayKeyFactory, gateway_key
from tests.security.leaks import Canary, find_leaks
from tests.subscriptions.factories import SubscriptionFactory
from tests.subscriptions.test_plan_sign_in import shown_code
from tests.trinity.audit.walk_table import (
    CANARY_HOOK,
    CANARY_HOOK_2,
    CANARY_KEY,
    CANARY_OPENAI,
    CANARY_PLAN,
    CANARY_PLAN_2,
    ROWS,
    TURN_OPERATIONS,
    Row,
)
from trinity import clock
from trinity.audit.models import AuditEntry
from trinity.crypto import Secret
from trinity.notification_channels import notification_channel_create

pytestmark = [pytest.mark.django_db, pytest.mark.e2e]

WRITE_METHODS = ("post", "put", "patch", "delete")


def _write_operations(client: APIClient) -> set[tuple[str, str]]:
    response = client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return {
        (method, path)
        for path, operations in response.json()["paths"].items()
        for method in operations
        if method in WRITE_METHODS
    }


@pytest.fixture
def world(simulator: SimulatorProcess, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """An admin and an operator (alpha), each with a session client and an API token
    client; a plan, a spare plan, alpha's agents bot and doomed, a schedule, a waiting
    turn, a channel and a gateway key. Every secret among them is a canary."""
    with platform_on(simulator, tmp_path):
        admin = UserFactory.create(username="root", is_staff=True, is_superuser=True)
        alpha = UserFactory.create(username="alpha")
        plan = SubscriptionFactory.create(name="plan-a", token=Secret(CANARY_PLAN))
        spare = SubscriptionFactory.create(name="plan-spare")
        bot = AgentFactory.create(name="bot", owner=alpha, subscription=plan)
        AgentFactory.create(name="doomed", owner=alpha)
        schedule_create(agent=bot, name="nightly", cron="0 3 * * *", message="hi", now=clock.now())
        turn = Execution.objects.create(
            agent=bot, agent_name="bot", message="m", status="queued", created_at=clock.now()
        )
        channel = notification_channel_create(
            name="hook-a", kind="json", url=CANARY_HOOK, now=clock.now()
        )
        flow, pasted = _signing_in(admin)
        device_flow = _device_signed_in(admin)
        key_secret = gateway_key()
        key = GatewayKeyFactory.create(owner=alpha, name="kept", secret=key_secret)
        canaries = [
            CANARY_PLAN,
            CANARY_PLAN_2,
            CANARY_KEY,
            CANARY_OPENAI,
            CANARY_HOOK,
            CANARY_HOOK_2,
            key_secret,
        ]
        clients = {"admin": _session(admin), "operator": _session(alpha)}
        for who, user in (("admin", admin), ("operator", alpha)):
            clients[f"{who}_token"], token = _token_client(user)
            canaries.append(token)
        yield {
            "users": {"admin": admin, "operator": alpha},
            "clients": clients,
            "canaries": canaries,
            "ids": {
                "plan": plan.pk,
                "spare_plan": spare.pk,
                "turn": turn.pk,
                "channel": channel.pk,
                "gw_key": key.pk,
                "flow": flow,
                "pasted": pasted,
                "device_flow": device_flow,
            },
        }


def _signing_in(admin: User) -> tuple[str, str]:
    """A plan sign-in the admin started, and the code#state the simulator's page shows
    for it (what the admin pastes back)."""
    started = plan_sign_in_start(
        user_id=admin.pk,
        provider=SignInProvider.CLAUDE,
        name="plan-signed",
        plan_type="max-5x",
        now=clock.now(),
    )
    return started.flow, shown_code(started.authorize_url)


def _device_signed_in(admin: User) -> str:
    """A device-code sign-in the admin started whose code was entered and approved at
    the simulator's device page: its next poll registers the plan."""
    started = plan_device_sign_in_start(
        user_id=admin.pk, name="plan-device", plan_type="pro", now=clock.now()
    )
    form = {"user_code": started.user_code, "decision": "approve"}
    assert httpx.post(started.verification_url, data=form, timeout=10).status_code == 200
    return started.flow


def _session(user: User) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def _token_client(user: User) -> tuple[APIClient, str]:
    _, token = AuthToken.objects.create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client, token


def _filled(value: Any, ids: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return re.sub(r"{(\w+)}", lambda m: str(ids[m.group(1)]), value)
    if isinstance(value, dict):
        return {k: _filled(v, ids) for k, v in value.items()}
    return value


def _typed(body: dict[str, Any]) -> dict[str, Any]:
    # A placeholder standing for an id is sent as the number it names.
    return {k: int(v) if isinstance(v, str) and v.isdigit() else v for k, v in body.items()}


def test_the_table_covers_every_write_operation_but_the_turns(world: dict[str, Any]) -> None:
    operations = _write_operations(world["clients"]["admin"])
    walked = {(row.method, row.template) for row in ROWS}
    assert operations - walked == TURN_OPERATIONS, "write operations without a row (or skipped)"
    assert walked <= operations, walked - operations
    assert len(ROWS) == len(walked), "one row per operation"


def _expected_actor(row: Row, world: dict[str, Any]) -> tuple[str, str, str]:
    user = world["users"][row.who.removesuffix("_token")]
    if row.who.endswith("_token"):
        return ("api_token", user.username, "api")
    return ("user", user.username, "panel")


def test_every_write_leaves_one_entry_with_its_actor_and_no_secret(
    world: dict[str, Any],
) -> None:
    secrets = list(world["canaries"])
    failures: list[str] = []
    for row in ROWS:
        url = _filled(row.url or row.template, world["ids"])
        body = _typed(_filled(row.body, world["ids"]))
        before = AuditEntry.objects.order_by("-id").values_list("id", flat=True).first() or 0
        client = world["clients"][row.who]
        response = getattr(client, row.method)(url, body or None, format="json")
        name = f"{row.method.upper()} {url}"
        if response.status_code >= 400:
            failures.append(f"{name}: {response.status_code} {response.content[:200]!r}")
            continue
        shown = response.json() if response.content and not response.streaming else {}
        secrets += [shown[k] for k in ("key", "token") if isinstance(shown, dict) and k in shown]
        entries = list(AuditEntry.objects.filter(id__gt=before))
        if len(entries) != 1:
            failures.append(f"{name}: {len(entries)} entries")
            continue
        entry = entries[0]
        got = (entry.actor_kind, entry.actor_username, entry.source)
        if got != _expected_actor(row, world) or entry.action != row.action:
            failures.append(f"{name}: {got} {entry.action!r}")
        if entry.status_code != response.status_code or entry.method != row.method.upper():
            failures.append(f"{name}: recorded {entry.method} {entry.status_code}")
    canaries = [Canary(f"secret {i}", value) for i, value in enumerate(secrets)]
    for entry in AuditEntry.objects.all():
        text = json.dumps(
            {f.attname: str(getattr(entry, f.attname)) for f in entry._meta.concrete_fields}
            | {"changes": entry.changes}
        )
        where = f"entry {entry.action} {entry.path}"
        failures += [str(leak) for leak in find_leaks(text, canaries, surface=where)]
    assert failures == [], "\n".join(failures)
