"""Canary: seed known secret values, exercise every endpoint and the admin, and
prove that no response body and no log line (raw record or rendered handler
output) carries any of them."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from django.test import Client
from rest_framework.test import APIClient

from subscriptions.models import FailureKind
from subscriptions.services import record_rate_limit_event
from tests.agents.factories import AgentFactory
from trinity import clock
from trinity.notifications import notification_send
from trinity.selectors import system_settings_get

CANARY_PLAN = "sk-ant-oat01-CANARYplanTOKEN0000000000000000000000001"
CANARY_PLAN_2 = "sk-ant-oat01-CANARYplanTOKEN0000000000000000000000002"
CANARY_KEY = "sk-ant-api03-CANARYplatformKEY00000000000000000000003"
CANARY_CODEX = "eyJhbGciOiJSUzI1NiJ9.eyJjYW5hcnkiOiJ5ZXMifQ.Q0FOQVJZY29kZXg0"
CANARY_OPENAI_KEY = "sk-proj-CANARYopenaiPlatformKEY000000000000000000000005"


@pytest.fixture
def rendered_logs() -> Iterator[io.StringIO]:
    """What the configured console handler really writes (after its redaction filter)."""
    stream = io.StringIO()
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler)]
    previous = [h.setStream(stream) for h in handlers]
    root_level = logging.getLogger().level
    logging.getLogger().setLevel(logging.DEBUG)
    yield stream
    logging.getLogger().setLevel(root_level)
    for handler, old in zip(handlers, previous, strict=True):
        handler.setStream(old)


@pytest.mark.django_db
def test_no_secret_reaches_a_response_or_a_log(
    admin_client_api: APIClient,
    owner_client: APIClient,
    owner: object,
    admin_user: object,
    caplog: pytest.LogCaptureFixture,
    rendered_logs: io.StringIO,
) -> None:
    caplog.set_level(logging.DEBUG)
    bodies: list[str] = []

    def hit(client: APIClient | Client, method: str, url: str, data: object = None) -> None:
        kwargs = {"format": "json"} if isinstance(client, APIClient) else {}
        response = (
            getattr(client, method)(url, data, **kwargs)
            if data is not None
            else getattr(client, method)(url)
        )
        assert response.status_code < 500, (method, url, response.status_code)
        bodies.append(response.content.decode(errors="replace"))

    plan = {"name": "canary", "token": CANARY_PLAN, "provider": "anthropic", "plan_type": "max-5x"}
    hit(admin_client_api, "post", "/api/subscriptions", plan)
    hit(admin_client_api, "post", "/api/subscriptions", {**plan, "token": CANARY_PLAN_2})
    hit(
        admin_client_api, "post", "/api/subscriptions", {**plan, "name": "bad", "token": CANARY_KEY}
    )
    hit(
        admin_client_api,
        "post",
        "/api/subscriptions",
        {"name": "cx", "token": CANARY_CODEX, "provider": "openai-codex", "plan_type": "pro"},
    )
    hit(
        admin_client_api,
        "post",
        "/api/subscriptions",
        {"name": "cx2", "token": CANARY_CODEX, "provider": "anthropic", "plan_type": "pro"},
    )
    hit(admin_client_api, "put", "/api/settings/platform-api-key", {"key": CANARY_KEY})
    hit(admin_client_api, "put", "/api/settings/platform-api-key", {"key": CANARY_PLAN})
    openai_key = "/api/settings/platform-api-key/openai-codex"
    hit(admin_client_api, "put", openai_key, {"key": CANARY_OPENAI_KEY})
    hit(admin_client_api, "put", openai_key, {"key": CANARY_KEY})  # refused: no echo
    hit(admin_client_api, "put", "/api/settings/platform-api-key", {"key": CANARY_OPENAI_KEY})
    agent = AgentFactory.create(name="bot", owner=owner)
    secret = agent.shared_secret.reveal()

    from subscriptions.models import Subscription

    subscription = Subscription.objects.get(name="canary")
    record_rate_limit_event(
        agent_name="bot",
        subscription_id=subscription.pk,
        error_message=f"401 token {CANARY_PLAN_2} rejected",
        failure_kind=FailureKind.AUTH,
        now=clock.now(),
    )
    notification_send(
        kind="switch", title=f"switched off {CANARY_PLAN}", body=CANARY_KEY, now=clock.now()
    )
    for url in (
        "/api/subscriptions",
        f"/api/subscriptions/{subscription.pk}",
        "/api/agents",
        "/api/agents/bot",
        "/api/settings/platform-api-key",
        "/api/settings/platform-api-key/openai-codex",
        "/api/settings/platform-api-key/openai-codex/budgets",
        "/api/budgets",
        "/api/subscriptions/settings/auto-switch",
        "/api/subscriptions/settings/api-key-fallback",
        "/api/subscriptions/settings/headroom-auto-refresh",
        "/api/subscriptions/settings/headroom-alert-threshold",
        "/api/executions",
        "/api/notifications",
        "/api/agents/bot/health",
        "/api/schema/",
    ):
        hit(admin_client_api, "get", url)
        hit(owner_client, "get", url)
    hit(owner_client, "put", "/api/subscriptions/agents/bot", {"subscription_id": subscription.pk})
    hit(owner_client, "patch", "/api/agents/bot", {"model": "claude-opus-4-1"})

    admin_site = Client()
    admin_site.force_login(admin_user)  # type: ignore[arg-type]
    settings_row = system_settings_get()
    from subscriptions.models import RateLimitEvent

    event = RateLimitEvent.objects.get()
    for url in (
        "/admin/",
        "/admin/subscriptions/subscription/",
        f"/admin/subscriptions/subscription/{subscription.pk}/change/",
        "/admin/subscriptions/ratelimitevent/",
        f"/admin/subscriptions/ratelimitevent/{event.pk}/change/",
        "/admin/agents/agent/",
        f"/admin/agents/agent/{agent.pk}/change/",
        "/admin/trinity/systemsettings/",
        f"/admin/trinity/systemsettings/{settings_row.pk}/change/",
        "/admin/trinity/notification/",
        "/admin/execution/execution/",
        "/admin/knox/authtoken/",
    ):
        hit(admin_site, "get", url)

    logging.getLogger("trinity.canary").warning(
        "a careless line: %s %s %s", CANARY_PLAN, CANARY_KEY, CANARY_OPENAI_KEY
    )  # the filter must catch even this
    raw_records = [r.getMessage() for r in caplog.records if r.name != "trinity.canary"]
    canaries = [CANARY_PLAN, CANARY_PLAN_2, CANARY_KEY, CANARY_CODEX, CANARY_OPENAI_KEY, secret]
    for canary in canaries:
        for body in bodies:
            assert canary not in body
        for message in raw_records:
            assert canary not in message
        assert canary not in rendered_logs.getvalue()
    assert "a careless line" in rendered_logs.getvalue()


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_no_secret_reaches_a_walked_turn_its_trail_notices_or_logs(
    control: object,
    owner: object,
    owner_client: APIClient,
    admin_client_api: APIClient,
    caplog: pytest.LogCaptureFixture,
    rendered_logs: io.StringIO,
) -> None:
    """A turn that walks every plan to the key, once refused by all and once served:
    the trail, the attempts, the switch, the events, the notifications, every API
    answer and every log line carry fingerprints at most."""
    from simulator.control import SimulatorControl
    from subscriptions import services as subscription_services
    from trinity import services as trinity_services

    assert isinstance(control, SimulatorControl)
    caplog.set_level(logging.DEBUG)
    for label, token in (("canary-a", CANARY_PLAN), ("canary-b", CANARY_PLAN_2)):
        control.register(token, kind="oauth", label=label)
        subscription_services.subscription_register(
            name=label, provider="anthropic", plan_type="max-5x", token=token
        )
        control.set_usage(token, "five_hour", percent=100)
    control.register(CANARY_KEY, kind="api_key", label="canary-key", credit_usd=0)
    trinity_services.platform_api_key_set(key=CANARY_KEY)
    agent = AgentFactory.create(name="bot", owner=owner)
    subscription_services.assignment_set(
        agent=agent,
        subscription_id=subscription_services.Subscription.objects.get(name="canary-a").pk,
    )
    bodies = [owner_client.post("/api/agents/bot/task", {"message": "hi"}, format="json")]
    assert bodies[0].status_code == 429, bodies[0].content  # every credential refused
    control.add_credit(CANARY_KEY, 5)
    from subscriptions.models import RateLimitEvent

    RateLimitEvent.objects.filter(credential_kind="api_key").delete()  # reopen the key rung
    served = owner_client.post("/api/agents/bot/task", {"message": "hi"}, format="json")
    assert served.status_code == 200 and served.json()["served_by_kind"] == "api_key"
    bodies.append(served)
    for client in (owner_client, admin_client_api):
        for url in ("/api/executions", "/api/notifications", "/api/agents/bot", "/api/agents"):
            bodies.append(client.get(url))
    from execution.models import Execution
    from trinity.models import Notification

    stored = [
        repr(list(Execution.objects.values())),
        repr(list(Notification.objects.values())),
        repr(list(RateLimitEvent.objects.values())),
    ]
    assert Notification.objects.filter(kind="pool_exhausted").exists()
    assert Notification.objects.filter(kind="api_key_route").exists()
    texts = [b.content.decode() for b in bodies] + stored
    texts += [r.getMessage() for r in caplog.records] + [rendered_logs.getvalue()]
    for canary in (CANARY_PLAN, CANARY_PLAN_2, CANARY_KEY, agent.shared_secret.reveal()):
        for text in texts:
            assert canary not in text
    # ...while the trail is really there, naming credentials by name and fingerprint.
    assert "canary-a (rate limit) -> canary-b (rate limit)" in bodies[0].content.decode()
    assert CANARY_KEY[-4:] in bodies[1].content.decode()


@pytest.mark.django_db
def test_no_webhook_url_reaches_a_response_or_a_log(
    admin_client_api: APIClient,
    owner_client: APIClient,
    caplog: pytest.LogCaptureFixture,
    rendered_logs: io.StringIO,
    django_capture_on_commit_callbacks: object,
) -> None:
    """A notification channel's URL is a credential: create, read, change, test and
    deliver through it (failing once, so the retry and failure paths log too), and
    neither the URL nor its path appears in an answer or a log line."""
    from tests.operations.test_webhooks import Receiver
    from trinity.celery import app
    from trinity.models import NotificationDelivery

    caplog.set_level(logging.DEBUG)
    secret_part = "canaryWEBHOOKsecret0000000000000005"
    with Receiver([500, 500, 200]) as hook:
        path = f"/services/TCANARY/BCANARY/{secret_part}"
        url = hook.base + path
        bodies = []
        created = admin_client_api.post(
            "/api/notification-channels",
            {"name": "canary", "kind": "json", "url": url, "min_level": "info"},
            format="json",
        )
        assert created.status_code == 201
        pk = created.json()["id"]
        bodies.append(created)
        # A refused replacement (a space inside) must not echo what was sent.
        bodies.append(
            admin_client_api.patch(
                f"/api/notification-channels/{pk}", {"url": url + " x"}, format="json"
            )
        )
        assert bodies[-1].status_code == 400
        bodies.append(
            admin_client_api.patch(f"/api/notification-channels/{pk}", {"url": url}, format="json")
        )
        bodies.append(admin_client_api.post(f"/api/notification-channels/{pk}/test"))
        app.conf.task_always_eager = True
        try:
            with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
                notification_send(kind="switch", title="to the hook", now=clock.now())
        finally:
            app.conf.task_always_eager = False
        assert NotificationDelivery.objects.filter(notification__isnull=False).get().attempts == 2
        for client in (admin_client_api, owner_client):
            for endpoint in (
                "/api/notification-channels",
                f"/api/notification-channels/{pk}",
                f"/api/notification-channels/{pk}/deliveries",
                "/api/notifications",
                "/api/schema/",
            ):
                bodies.append(client.get(endpoint))
        assert len(hook.received) == 3 and hook.received[0]["path"] == path  # really used

    texts = [b.content.decode(errors="replace") for b in bodies]
    texts += [r.getMessage() for r in caplog.records] + [rendered_logs.getvalue()]
    texts += [repr(list(NotificationDelivery.objects.values()))]
    assert any("attempt 1 failed" in r.getMessage() for r in caplog.records)
    for text in texts:
        for leak in (url, path, secret_part):
            assert leak not in text
