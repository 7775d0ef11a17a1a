"""Webhook notification channels: delivery against a real HTTP receiver on loopback,
retries with exponential backoff recorded per attempt, the admin-only REST API, and
a turn that is never held up by a receiver."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import time_machine
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from tests.agents.factories import AgentFactory
from tests.conftest import simulator  # noqa: F401 - one simulator for this module's e2e test
from tests.subscriptions.factories import plan_token
from trinity import notification_channels as channels
from trinity import webhooks
from trinity.celery import app
from trinity.crypto import Secret
from trinity.models import (
    DeliveryStatus,
    Notification,
    NotificationChannel,
    NotificationDelivery,
)
from trinity.notifications import notification_send
from trinity.tasks import deliver_notification, resume_notification_deliveries

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class Receiver:
    """A real webhook receiver on 127.0.0.1: answers each POST with the next status in
    ``script`` (the last one repeats) and records what it got."""

    def __init__(self, script: list[int]) -> None:
        self.script = list(script)
        self.received: list[dict[str, Any]] = []
        self.hosts: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"null")
                receiver.received.append({"path": self.path, "body": body})
                receiver.hosts.append(self.headers.get("Host", ""))
                status = receiver.script.pop(0) if len(receiver.script) > 1 else receiver.script[0]
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else b"receiver is down")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # the receiver's own access log is not the platform's

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        # A Slack-shaped path: the path is the credential.
        return f"{self.base}/services/T0TEST/B0TEST/{uuid.uuid4().hex}"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Callable[[list[int]], Receiver]]:
    started: list[Receiver] = []

    def make(script: list[int]) -> Receiver:
        r = Receiver(script).__enter__()
        started.append(r)
        return r

    yield make
    for r in started:
        r.__exit__()


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hooks/{uuid.uuid4().hex}"


def channel(url: str, **kwargs: Any) -> NotificationChannel:
    values: dict[str, Any] = {
        "name": f"hook-{uuid.uuid4().hex[:6]}",
        "kind": "json",
        "min_level": "info",
        **kwargs,
    }
    return channels.notification_channel_create(url=url, now=NOW, **values)


# --- rules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "retry_after", "countdown"),
    [
        (1, None, 30),
        (2, None, 60),
        (3, None, 120),
        (7, None, 1920),
        (8, None, 3600),  # 3840 capped at an hour
        (20, None, 3600),
        (1, 300, 300),  # a receiver's Retry-After is honoured...
        (4, 10, 240),  # ...but never makes the backoff shorter
        (1, 86400, 3600),  # ...and is capped too
    ],
)
def test_the_backoff_doubles_from_30_seconds_and_stops_at_an_hour(
    attempt: int, retry_after: int | None, countdown: int
) -> None:
    assert channels.retry_countdown(attempt, retry_after=retry_after) == countdown


@pytest.mark.parametrize(
    ("min_level", "kinds", "kind", "level", "sent"),
    [
        ("warning", [], "pool_exhausted", "critical", True),
        ("warning", [], "headroom_alert", "warning", True),  # the edge: equal level
        ("warning", [], "subscription_switched", "info", False),
        ("info", ["pool_exhausted"], "subscription_switched", "info", False),
        ("info", ["pool_exhausted"], "pool_exhausted", "critical", True),
        ("critical", ["pool_exhausted"], "pool_exhausted", "warning", False),
    ],
)
def test_a_channel_takes_its_kinds_at_or_above_its_level(
    min_level: str, kinds: list[str], kind: str, level: str, sent: bool
) -> None:
    hook = NotificationChannel(min_level=min_level, kinds=kinds, enabled=True)
    assert channels.channel_matches(hook, kind=kind, level=level) is sent
    hook.enabled = False
    assert channels.channel_matches(hook, kind=kind, level=level) is False


@pytest.mark.django_db
def test_a_notice_about_an_agent_names_its_owner_to_the_receiver(
    owner: User, other_user: User
) -> None:
    """Names are unique per owner only: a receiver told about "bot" is told whose, in
    the JSON payload and in Slack's text alike."""
    bots = {u.username: AgentFactory.create(name="bot", owner=u) for u in (owner, other_user)}
    json_hook = NotificationChannel(name="j", kind="json")
    slack_hook = NotificationChannel(name="s", kind="slack")
    for whose, bot in bots.items():
        note = notification_send(
            kind="k", title="switched", agent_name="bot", agent_id=bot.pk, now=NOW
        )
        assert note is not None
        assert channels.payload_for(json_hook, note)["agent_owner"] == whose
        assert f"_agent: bot ({whose})_" in channels.payload_for(slack_hook, note)["text"]
    fleet = notification_send(kind="k", title="fleet", now=NOW)
    assert fleet is not None and channels.payload_for(json_hook, fleet)["agent_owner"] is None
    assert "_agent" not in channels.payload_for(slack_hook, fleet)["text"]


# --- delivery -----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_receiver_that_fails_twice_then_accepts_gets_one_delivery_in_three_attempts(
    receiver: Callable[[list[int]], Receiver],
    eager: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    hook = receiver([500, 503, 200])
    channel(hook.url, kinds=["pool_exhausted"])
    with time_machine.travel(NOW, tick=False), django_capture_on_commit_callbacks(execute=True):
        note = notification_send(
            kind="pool_exhausted", level="critical", title="No credential", now=NOW
        )
        # Nothing is posted before the notification's transaction commits.
        assert hook.received == []
    assert note is not None
    delivery = NotificationDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.notification_id) == (
        DeliveryStatus.DELIVERED,
        3,
        note.pk,
    )
    attempts = list(delivery.attempt_log.values_list("number", "status_code", "delivered"))
    assert attempts == [(1, 500, False), (2, 503, False), (3, 200, True)]
    # The backoff each failure chose: 30 s, then 60 s; none after the one that served.
    assert list(delivery.attempt_log.values_list("retry_in_seconds", flat=True)) == [30, 60, None]
    assert [r["body"]["title"] for r in hook.received] == ["No credential"] * 3
    assert hook.received[0]["body"]["kind"] == "pool_exhausted"


@pytest.mark.django_db
def test_each_retry_is_due_after_its_backoff_when_the_task_runs_again(
    receiver: Callable[[list[int]], Receiver],
) -> None:
    """Not eager: each run of the task is one attempt; the row says when the next is due."""
    hook = receiver([500, 500, 200])
    hook_channel = channel(hook.url)
    note = Notification.objects.create(kind="k", level="info", title="t", created_at=NOW)
    [delivery_id] = channels.deliveries_create(notification=note, channels=[hook_channel], now=NOW)
    at = NOW
    for expected in (30, 60):
        with time_machine.travel(at, tick=False):
            outcome = channels.delivery_attempt(delivery_id=delivery_id, now=at)
        assert (outcome.outcome, outcome.retry_in) == ("retry", expected)
        row = NotificationDelivery.objects.get(pk=delivery_id)
        assert row.next_attempt_at == at + timedelta(seconds=expected)
        at = row.next_attempt_at
    with time_machine.travel(at, tick=False):
        assert deliver_notification.apply(args=(delivery_id,)).get() == "delivered"
    row = NotificationDelivery.objects.get(pk=delivery_id)
    assert (row.status, row.attempts, row.finished_at) == (DeliveryStatus.DELIVERED, 3, at)
    assert [a.at for a in row.attempt_log.all()] == [NOW, NOW + timedelta(seconds=30), at]
    # A duplicate message for a finished delivery posts nothing.
    assert deliver_notification.apply(args=(delivery_id,)).get() == "skipped"
    assert len(hook.received) == 3


@pytest.mark.django_db
def test_a_receiver_that_stays_down_fails_after_eight_attempts_and_loses_the_notification_nowhere(
    eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    channel(closed_port_url())
    with time_machine.travel(NOW, tick=False), django_capture_on_commit_callbacks(execute=True):
        note = notification_send(kind="k", level="warning", title="still here", now=NOW)
    assert note is not None
    delivery = NotificationDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, channels.MAX_ATTEMPTS)
    log = list(delivery.attempt_log.all())
    assert [a.retry_in_seconds for a in log] == [30, 60, 120, 240, 480, 960, 1920, None]
    assert all(a.status_code is None and a.error.startswith("ConnectError") for a in log)
    assert Notification.objects.get(pk=note.pk).title == "still here"


@pytest.mark.django_db
def test_a_gone_hook_is_not_retried(
    receiver: Callable[[list[int]], Receiver],
    eager: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    hook = receiver([404])
    channel(hook.url)
    with django_capture_on_commit_callbacks(execute=True):
        notification_send(kind="k", level="critical", title="t", now=NOW)
    delivery = NotificationDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, 1)
    assert delivery.attempt_log.get().error == "HTTP 404"  # the code only: a body never comes back


@pytest.mark.django_db
def test_below_its_level_or_outside_its_kinds_a_channel_gets_nothing(
    receiver: Callable[[list[int]], Receiver],
) -> None:
    hook = receiver([200])
    channel(hook.url, min_level="warning", kinds=["pool_exhausted", "headroom_alert"])
    channel(hook.url, enabled=False)
    notification_send(kind="pool_exhausted", level="info", title="quiet", now=NOW)
    notification_send(kind="subscription_switched", level="critical", title="other", now=NOW)
    assert not NotificationDelivery.objects.exists()
    notification_send(kind="headroom_alert", level="warning", title="sent", now=NOW)
    assert NotificationDelivery.objects.count() == 1


@pytest.mark.django_db
def test_the_sweep_resumes_a_delivery_whose_message_was_lost(
    receiver: Callable[[list[int]], Receiver], eager: None
) -> None:
    hook = receiver([200])
    hook_channel = channel(hook.url)
    note = Notification.objects.create(kind="k", level="info", title="t", created_at=NOW)
    # Pending and due at NOW, but its message never reached a worker.
    [lost] = channels.deliveries_create(notification=note, channels=[hook_channel], now=NOW)
    just_due = NOW + channels.RESUME_GRACE - timedelta(seconds=1)
    with time_machine.travel(just_due, tick=False):
        assert resume_notification_deliveries.apply().get() == 0  # still within the grace
    with time_machine.travel(NOW + channels.RESUME_GRACE, tick=False):
        assert resume_notification_deliveries.apply().get() == 1
    assert NotificationDelivery.objects.get(pk=lost).status == DeliveryStatus.DELIVERED
    assert len(hook.received) == 1


def test_delivery_tasks_have_stable_names_and_time_limits() -> None:
    for name in ("trinity.deliver_notification", "trinity.resume_notification_deliveries"):
        task = app.tasks[name]
        assert task.soft_time_limit and task.time_limit
        assert task.time_limit > task.soft_time_limit
    entry = app.conf.beat_schedule["resume-notification-deliveries"]
    assert entry["task"] == "trinity.resume_notification_deliveries"


# --- the REST API -------------------------------------------------------------------


@pytest.mark.django_db
def test_only_an_admin_reads_or_changes_channels(
    owner_client: APIClient,
    other_client: APIClient,
    admin_client_api: APIClient,
    anon_client: APIClient,
) -> None:
    url = f"https://hooks.example.test/services/T1/B1/{uuid.uuid4().hex}"
    body = {"name": "ops", "kind": "slack", "url": url, "min_level": "warning"}
    for client in (owner_client, other_client):
        assert client.post("/api/notification-channels", body, format="json").status_code == 403
        assert client.get("/api/notification-channels").status_code == 403
    assert anon_client.get("/api/notification-channels").status_code == 401
    assert not NotificationChannel.objects.exists()

    created = admin_client_api.post("/api/notification-channels", body, format="json")
    assert created.status_code == 201, created.content
    assert created["Cache-Control"].startswith("max-age=0")
    data = created.json()
    assert (data["url_host"], data["url_fingerprint"], data["kinds"]) == (
        "hooks.example.test",
        url[-4:],
        [],
    )
    pk = data["id"]
    for client in (owner_client, other_client):
        assert client.get(f"/api/notification-channels/{pk}").status_code == 403
        assert client.delete(f"/api/notification-channels/{pk}").status_code == 403
        assert client.post(f"/api/notification-channels/{pk}/test").status_code == 403
        assert client.get(f"/api/notification-channels/{pk}/deliveries").status_code == 403

    patched = admin_client_api.patch(
        f"/api/notification-channels/{pk}",
        {"kinds": ["pool_exhausted"], "enabled": False},
        format="json",
    )
    assert patched.status_code == 200 and patched.json()["kinds"] == ["pool_exhausted"]
    assert patched.json()["enabled"] is False
    bodies = [created, patched, admin_client_api.get("/api/notification-channels")]
    bodies.append(admin_client_api.get(f"/api/notification-channels/{pk}"))
    for response in bodies:
        assert url not in response.content.decode()
        assert "/services/T1/B1/" not in response.content.decode()
    stored = NotificationChannel.objects.get()
    assert stored.url is not None and stored.url.reveal() == url  # decrypts to what was sent
    assert url not in repr(stored) and url not in str(stored.url)
    assert admin_client_api.delete(f"/api/notification-channels/{pk}").status_code == 204
    assert not NotificationChannel.objects.exists()


@pytest.mark.django_db
def test_the_url_is_encrypted_at_rest(admin_client_api: APIClient) -> None:
    from django.db import connection

    url = f"https://hooks.example.test/services/{uuid.uuid4().hex}"
    admin_client_api.post(
        "/api/notification-channels", {"name": "a", "kind": "json", "url": url}, format="json"
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT url FROM trinity_notificationchannel")
        [(stored,)] = cursor.fetchall()
    assert url not in stored and stored.startswith("gAAAA")  # Fernet ciphertext


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "a", "kind": "json", "url": "ftp://hooks.example.test/x"}, "url"),
        ({"name": "a", "kind": "json", "url": "https:///no-host"}, "url"),
        ({"name": "a", "kind": "json", "url": "https://h.test/a b"}, "url"),
        ({"name": "a", "kind": "teams", "url": "https://h.test/x"}, "kind"),
        (
            {"name": "a", "kind": "json", "url": "https://h.test/x", "min_level": "loud"},
            "min_level",
        ),
        ({"name": "a", "kind": "json", "url": "https://h.test/x", "kinds": ["Bad Kind"]}, "kinds"),
    ],
)
def test_a_bad_channel_is_refused_naming_the_field_and_never_echoing_the_url(
    admin_client_api: APIClient, body: dict[str, Any], field: str
) -> None:
    response = admin_client_api.post("/api/notification-channels", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.content
    assert body["url"] not in response.content.decode()
    assert not NotificationChannel.objects.exists()


@pytest.mark.django_db
def test_send_test_posts_once_and_records_the_attempt(
    admin_client_api: APIClient, receiver: Callable[[list[int]], Receiver]
) -> None:
    hook = receiver([500])
    created = admin_client_api.post(
        "/api/notification-channels",
        {"name": "slack", "kind": "slack", "url": hook.url, "min_level": "critical"},
        format="json",
    ).json()
    failed = admin_client_api.post(f"/api/notification-channels/{created['id']}/test")
    assert failed.status_code == 200
    assert failed.json()["delivered"] is False and failed.json()["status_code"] == 500
    assert failed.json()["retry_in_seconds"] is None  # a test is never retried
    hook.script = [200]
    served = admin_client_api.post(f"/api/notification-channels/{created['id']}/test").json()
    assert served["delivered"] is True and served["status_code"] == 200
    # Slack's shape: one text field.
    assert [set(r["body"]) for r in hook.received] == [{"text"}, {"text"}]
    assert "Test notification from Trinity" in hook.received[0]["body"]["text"]
    history = admin_client_api.get(f"/api/notification-channels/{created['id']}/deliveries")
    assert [(d["notification_kind"], d["status"], d["attempts"]) for d in history.json()] == [
        ("test", "delivered", 1),
        ("test", "failed", 1),
    ]


# --- a real turn --------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_walked_turn_is_served_at_once_while_its_switch_notice_is_delivered_in_three_attempts(
    control: SimulatorControl,
    owner: User,
    owner_client: APIClient,
    receiver: Callable[[list[int]], Receiver],
) -> None:
    """A real walk (plan-a refuses, plan-b serves) through the API and a real agent
    server: its switch notification is committed with a pending delivery and handed to
    the broker; the turn answers without contacting the receiver. A worker's run then
    meets a receiver that fails twice before accepting."""
    subscriptions = {}
    for name in ("plan-a", "plan-b"):
        token = plan_token()
        control.register(token, kind="oauth", label=name)
        subscriptions[name], _ = subscription_services.subscription_register(
            name=name, provider="anthropic", plan_type="max-20x", token=token
        )
        if name == "plan-a":
            control.set_usage(token, "five_hour", percent=100)
    agent = AgentFactory.create(name="bot", owner=owner)
    subscription_services.assignment_set(agent=agent, subscription_id=subscriptions["plan-a"].pk)
    hook = receiver([500, 500, 200])
    channel(hook.url, min_level="info", kinds=["subscription_switched"])

    # A real broker, no worker: the turn's commit only publishes the delivery.
    app.conf.task_always_eager = False
    try:
        answer = owner_client.post("/api/agents/bot/task", {"message": "hi"}, format="json")
    finally:
        app.conf.task_always_eager = True
    assert answer.status_code == 200, answer.content
    assert answer.json()["served_by_subscription"]["name"] == "plan-b"
    assert hook.received == []
    delivery = NotificationDelivery.objects.get()
    assert delivery.status == DeliveryStatus.PENDING and delivery.attempts == 0
    assert delivery.notification is not None
    assert delivery.notification.kind == "subscription_switched"

    # The worker's run (here in-line, its retries too).
    deliver_notification.apply(args=(delivery.pk,))
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERED, 3)
    assert list(delivery.attempt_log.values_list("status_code", "retry_in_seconds")) == [
        (500, 30),
        (500, 60),
        (200, None),
    ]
    payload = hook.received[-1]["body"]
    assert payload["title"] == "Subscription auto-switched to 'plan-b'"
    assert payload["agent_name"] == "bot" and payload["data"]["to_name"] == "plan-b"


# --- destinations: only public addresses unless the admin lists one ----------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.9.9.9", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),  # the cloud metadata service
        ("fe80::1", "link-local"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.10", "private"),
        ("fd00:ec2::254", "private"),  # AWS's IPv6 metadata address
        ("100.64.0.1", "shared (CGNAT)"),
        ("100.100.100.200", "shared (CGNAT)"),  # Alibaba's metadata address
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 - a value under test
        ("::", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.1", "reserved"),  # documentation range: not public
        # IPv4 hidden inside IPv6 is judged as the IPv4 it reaches
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of the metadata address
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
    ],
)
def test_a_destination_address_is_refused_unless_it_is_public(
    address: str, reason: str | None
) -> None:
    assert webhooks.address_refusal(address, allow=()) == reason


@pytest.mark.parametrize(
    ("address", "allow", "refused"),
    [
        ("10.1.2.3", ("10.0.0.0/8",), False),
        ("10.1.2.3", ("10.1.2.3",), False),
        ("10.1.2.3", ("192.168.0.0/16",), True),
        ("::ffff:10.1.2.3", ("10.0.0.0/8",), False),
        ("169.254.169.254", ("10.0.0.0/8",), True),
    ],
)
def test_the_admin_allow_list_admits_the_addresses_it_names(
    address: str, allow: tuple[str, ...], refused: bool
) -> None:
    assert (webhooks.address_refusal(address, allow=allow) is not None) is refused


@pytest.fixture
def no_webhook_allow(settings: Any) -> None:
    """Production's default: nothing but public addresses (tests/conftest.py allows
    loopback for every other test's receiver)."""
    settings.TRINITY_WEBHOOK_ALLOW = ()


@pytest.mark.django_db
@pytest.mark.usefixtures("no_webhook_allow")
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:9/hooks/secret-path", "loopback"),
        ("http://localhost:9/hooks/secret-path", "loopback"),  # refused after DNS
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[::ffff:169.254.169.254]/latest/", "link-local"),
        ("https://10.0.0.5/hooks/secret-path", "private"),
        ("https://no-such-host.invalid/hooks/secret-path", "does not resolve"),
    ],
)
def test_saving_a_channel_to_a_non_public_destination_is_a_400_naming_why(
    admin_client_api: APIClient, url: str, reason: str
) -> None:
    response = admin_client_api.post(
        "/api/notification-channels", {"name": "a", "kind": "json", "url": url}, format="json"
    )
    assert response.status_code == 400, response.content
    [message] = response.json()["url"]
    assert reason in message
    assert "secret-path" not in response.content.decode()
    assert not NotificationChannel.objects.exists()


@pytest.mark.django_db
def test_a_delivery_rechecks_the_destination_and_sends_nothing_once_it_is_refused(
    receiver: Callable[[list[int]], Receiver], settings: Any
) -> None:
    hook = receiver([200])
    saved = channel(hook.url)  # allowed when saved (the test allow list)
    settings.TRINITY_WEBHOOK_ALLOW = ()  # the admin takes loopback off the list

    outcome = channels.channel_test_send(channel=saved, now=NOW)

    assert hook.received == []
    assert outcome.delivered is False and "loopback" in outcome.error


@pytest.mark.django_db
def test_a_delivery_connects_to_the_address_it_checked_not_to_a_second_answer(
    receiver: Callable[[list[int]], Receiver],
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DNS rebinding: the name answers an allowed address for the check and a refused
    one a moment later. The delivery must reach the checked address, resolving once."""
    hook = receiver([200])
    port = hook.server.server_address[1]
    settings.TRINITY_WEBHOOK_ALLOW = ("127.0.0.1",)
    answers = iter(["127.0.0.1"] + ["127.0.0.2"] * 10)  # .2 is loopback, and not listed
    real = socket.getaddrinfo
    asked: list[str] = []

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "hooks.rebind.test":
            return real(host, *args, **kwargs)
        asked.append(host)
        return real(next(answers), *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    result = webhooks.post(
        url=Secret(f"http://hooks.rebind.test:{port}/services/x"), payload={"text": "hi"}
    )

    assert result.delivered is True, result.error
    assert asked == ["hooks.rebind.test"]
    assert hook.received == [{"path": "/services/x", "body": {"text": "hi"}}]
    assert hook.hosts == [f"hooks.rebind.test:{port}"]


@pytest.mark.django_db
def test_a_redirect_is_not_followed(receiver: Callable[[list[int]], Receiver]) -> None:
    hook = receiver([302])
    result = webhooks.post(url=Secret(hook.url), payload={"text": "hi"})
    assert result.delivered is False and result.status_code == 302
    assert len(hook.received) == 1


@pytest.mark.django_db
def test_send_test_reports_the_status_code_and_never_the_receivers_body(
    admin_client_api: APIClient, receiver: Callable[[list[int]], Receiver]
) -> None:
    hook = receiver([500])
    created = admin_client_api.post(
        "/api/notification-channels",
        {"name": "echo", "kind": "json", "url": hook.url},
        format="json",
    ).json()
    answer = admin_client_api.post(f"/api/notification-channels/{created['id']}/test")
    assert answer.json()["status_code"] == 500
    assert answer.json()["error"] == "HTTP 500"
    assert "receiver is down" not in answer.content.decode()


def _self_signed(tmp_path: Any, name: str) -> tuple[str, str]:
    """A certificate for ``name`` and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(datetime.now(UTC) - timedelta(days=1))
        .not_valid_after(datetime.now(UTC) + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("certified", "delivered"), [("hooks.tls.test", True), ("other.test", False)]
)
def test_an_https_delivery_to_the_checked_address_still_verifies_the_hosts_certificate(
    tmp_path: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    certified: str,
    delivered: bool,
) -> None:
    """Pinning the address must not weaken TLS: SNI and the certificate check use the
    URL's host name, so a receiver certified for another name is not delivered to."""
    import ssl

    from trinity.http import ProcessClient

    cert, key = _self_signed(tmp_path, certified)
    hook = Receiver([200])
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    hook.server.socket = server_context.wrap_socket(hook.server.socket, server_side=True)
    port = hook.server.server_address[1]
    real = socket.getaddrinfo
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, *a, **k: real("127.0.0.1" if host == "hooks.tls.test" else host, *a, **k),
    )
    # The pooled client as webhooks builds it, trusting this test's certificate.
    client_context = ssl.create_default_context(cafile=cert)
    monkeypatch.setattr(
        webhooks,
        "_http",
        ProcessClient(lambda: httpx.Client(verify=client_context, follow_redirects=False)),
    )
    settings.TRINITY_WEBHOOK_ALLOW = ("127.0.0.1",)
    with hook:
        result = webhooks.post(
            url=Secret(f"https://hooks.tls.test:{port}/services/x"), payload={"text": "hi"}
        )

    assert result.delivered is delivered, result.error
    assert hook.hosts == ([f"hooks.tls.test:{port}"] if delivered else [])
