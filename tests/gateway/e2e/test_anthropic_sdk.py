"""The official ``anthropic`` SDK through the real gateway to the provider simulator:
served on a plan, walked inside the request when the plan refuses, refused in the
provider's shape when nothing can serve. What served each request is read from the
simulator's request log, not from our own records."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

import anthropic
import pytest
from django.contrib.auth.models import User

from gateway.models import GatewaySession, GatewayUsage
from simulator.control import SimulatorControl
from subscriptions.models import Subscription
from tests.execution.support import register_plan
from tests.gateway.e2e.support import Gateway, issue, wait_for
from trinity import services as trinity_services
from trinity.crypto import Secret
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MODEL = "claude-sonnet-5-5"
SESSION = "user_abc_account__session_0f0e0d0c-0000-4000-8000-000000000001"


def client(gw: Gateway, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=key, base_url=gw.url, max_retries=0, timeout=30)


def ask(sdk: anthropic.Anthropic, text: str = "hello") -> anthropic.types.Message:
    return sdk.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": text}],
        metadata={"user_id": SESSION},
    )


def upstream(control: SimulatorControl) -> list[tuple[str | None, int]]:
    return [
        (r["credential"], r["status"]) for r in control.requests() if r["path"] == "/v1/messages"
    ]


def test_a_message_is_served_on_a_plan_and_the_gateway_key_never_goes_upstream(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    plan, token = register_plan(control, "max-a")
    key = issue(person)

    answer = ask(client(gw, key), "say hi")

    assert answer.content[0].text == "Simulated reply: say hi"  # type: ignore[union-attr]
    assert upstream(control) == [("max-a", 200)]
    sent = bytes(gw.tap.upstream)
    assert token.encode() in sent  # the plan's token went upstream...
    assert key.encode() not in sent  # ...never the person's gateway key
    row = wait_for(lambda: GatewayUsage.objects.filter(key__owner=person).first())
    assert (row.served_by_name, row.status, row.streamed) == ("max-a", 200, False)
    assert row.input_tokens > 0 and row.output_tokens > 0
    assert row.billed_usd == 0 and row.list_usd > 0


def test_a_stream_is_relayed_event_by_event_and_metered(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    register_plan(control, "max-a")
    sdk = client(gw, issue(person))

    with sdk.messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "stream please"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()

    assert text == "Simulated reply: stream please"
    row = wait_for(lambda: GatewayUsage.objects.filter(key__owner=person).first())
    assert row.streamed and row.status == 200
    assert row.output_tokens == final.usage.output_tokens > 0


def test_a_refused_plan_walks_inside_the_request_once_switched_and_noticed(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    a, a_token = register_plan(control, "max-a")
    b, b_token = register_plan(control, "max-b")
    sdk = client(gw, issue(person))
    ask(sdk)
    session = GatewaySession.objects.get(key__owner=person)
    on_a = session.subscription_id == a.pk
    control.set_usage(a_token if on_a else b_token, "five_hour", percent=100)
    control.clear_requests()

    ask(sdk, "after the reset")
    ask(sdk, "and again")

    other, refused = ("max-b", "max-a") if on_a else ("max-a", "max-b")
    assert upstream(control) == [(refused, 429), (other, 200), (other, 200)]
    # The switch is committed once the answer went out: the client may read first.
    wait_for(lambda: GatewaySession.objects.filter(pk=session.pk, switches=1).first())
    session.refresh_from_db()
    assert session.subscription_id == (b.pk if on_a else a.pk)
    assert session.switches == 1
    notices = wait_for(
        lambda: list(Notification.objects.filter(kind="gateway_session_switched")) or None
    )
    assert len(notices) == 1 and other in notices[0].title


def test_when_nothing_can_serve_the_client_gets_a_429_with_the_earliest_reset(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    _, a_token = register_plan(control, "max-a")
    _, b_token = register_plan(control, "max-b")
    control.set_usage(a_token, "five_hour", percent=100, resets_in=3600)
    control.set_usage(b_token, "five_hour", percent=100, resets_in=1800)

    with pytest.raises(anthropic.RateLimitError) as refused:
        ask(client(gw, issue(person)))

    assert refused.value.status_code == 429
    assert refused.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    retry_after = int(refused.value.response.headers["retry-after"])
    assert 1700 <= retry_after <= 1900  # max-b's reset, the earlier of the two


def test_the_platform_key_serves_when_every_plan_refuses_and_is_billed(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    _, a_token = register_plan(control, "max-a")
    control.set_usage(a_token, "five_hour", percent=100)
    key = f"sk-ant-api03-{secrets.token_hex(24)}"
    control.register(key, kind="api_key", label="platform-key", credit_usd=50)
    trinity_services.platform_api_key_set(key=key)

    answer = ask(client(gw, issue(person)))

    assert answer.content
    assert upstream(control)[-1] == ("platform-key", 200)
    row = wait_for(lambda: GatewayUsage.objects.filter(key__owner=person).first())
    assert row.served_by_kind == "api_key" and row.billed_usd == row.list_usd > 0


def test_a_signed_in_plan_whose_token_is_expiring_is_refreshed_once_before_it_is_sent(
    gw: Gateway, control: SimulatorControl, person: User
) -> None:
    plan, token = register_plan(control, "max-a")
    refresh = "sk-ant-ort01-" + secrets.token_urlsafe(40)
    # Its access token expires now at the provider; the platform's stored expiry says
    # it is about to.
    control.register(token, kind="oauth", refresh_token=refresh, expires_in=3600)
    control.expire_access(token)
    Subscription.objects.filter(pk=plan.pk).update(
        refresh_token=Secret(refresh),
        token_expires_at=datetime.now(UTC) + timedelta(minutes=2),
    )
    sdk = client(gw, issue(person))

    ask(sdk, "say hi")
    ask(sdk, "again")

    assert upstream(control) == [("max-a", 200), ("max-a", 200)]
    assert control.credential("max-a")["refreshes"] == 1
    plan.refresh_from_db()
    assert plan.token is not None and plan.token.reveal() != token
    assert token.encode() not in bytes(gw.tap.upstream)
