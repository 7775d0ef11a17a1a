"""Routing policies end to end: the REST API, a real agent server running the real
Claude Code CLI, the provider simulator and the real database. What each credential
was asked is read from the simulator's request log, not from our own records."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents.models import Agent, RoutingPolicy
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from subscriptions.headroom.store import snapshots_write
from subscriptions.models import Subscription
from tests.agents.factories import AgentFactory
from tests.execution.support import agent_on, messages_sent, register_plan, task
from tests.headroom.readings import limited
from tests.subscriptions.factories import plan_token
from trinity import clock
from trinity import services as trinity_services
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

KEY_LABEL = "platform-key"


@pytest.fixture
def key(control: SimulatorControl) -> Callable[[], str]:
    """A platform key with plenty of credit: the fallback would serve if it were asked."""

    def make() -> str:
        value = "sk-ant-api03-" + uuid.uuid4().hex * 2
        control.register(value, kind="api_key", label=KEY_LABEL, credit_usd=100)
        trinity_services.platform_api_key_set(key=value)
        return value

    return make


def key_requests(control: SimulatorControl) -> list[str]:
    """Every request the upstream saw on the platform key (turns, probes, anything)."""
    return [r["path"] for r in control.requests() if r["credential"] == KEY_LABEL]


def subscription_only(agent: Agent) -> Agent:
    Agent.objects.filter(pk=agent.pk).update(routing_policy=RoutingPolicy.SUBSCRIPTION_ONLY)
    agent.refresh_from_db()
    return agent


def test_a_subscription_only_agent_whose_plans_all_refuse_never_reaches_the_key(
    control: SimulatorControl, key: Callable[[], str], owner: User, owner_client: APIClient
) -> None:
    a, a_token = register_plan(control, "plan-a")
    _, b_token = register_plan(control, "plan-b")
    subscription_only(agent_on(owner, a))
    key_value = key()
    control.set_usage(a_token, "five_hour", percent=100)
    control.set_usage(b_token, "five_hour", percent=100)

    body = task(owner_client)

    assert body["http_status"] == 429, body
    assert body["error_code"] == "billing"
    assert body["error_detail"] == (
        "Tried: plan-a (rate limit) -> plan-b (rate limit); every candidate refused. "
        "Its routing policy (subscription-only) never uses the platform API key."
    )
    assert body["earliest_reset"] is not None
    assert datetime.fromisoformat(body["earliest_reset"]) > clock.now()
    assert messages_sent(control) == [("plan-a", 429), ("plan-b", 429)]
    assert key_requests(control) == []
    assert [a["credential_kind"] for a in body["attempts"]] == ["subscription", "subscription"]
    assert key_value not in str(body)
    assert Notification.objects.filter(kind="pool_exhausted").count() == 1
    assert not Notification.objects.filter(kind="api_key_route").exists()


def test_a_thrifty_agent_in_the_same_pool_does_reach_the_key(
    control: SimulatorControl, key: Callable[[], str], owner: User, owner_client: APIClient
) -> None:
    """The control for the test above: the same pool, the default policy."""
    a, a_token = register_plan(control, "plan-a")
    _, b_token = register_plan(control, "plan-b")
    agent_on(owner, a)
    key()
    control.set_usage(a_token, "five_hour", percent=100)
    control.set_usage(b_token, "five_hour", percent=100)

    body = task(owner_client)

    assert body["http_status"] == 200, body
    assert messages_sent(control) == [("plan-a", 429), ("plan-b", 429), (KEY_LABEL, 200)]


def test_a_subscription_only_agent_on_an_overage_plan_runs_on_a_hard_stop_plan_instead(
    control: SimulatorControl, key: Callable[[], str], owner: User, owner_client: APIClient
) -> None:
    token = plan_token()
    control.register(token, kind="oauth", label="plan-ent")
    enterprise, _ = subscription_services.subscription_register(
        name="plan-ent", provider="anthropic", plan_type="enterprise", token=token
    )
    b, _ = register_plan(control, "plan-b")
    agent = subscription_only(agent_on(owner, enterprise))
    key()

    body = task(owner_client)

    assert body["http_status"] == 200, body
    assert messages_sent(control) == [("plan-b", 200)]  # the overage plan was never asked
    assert [(x["name"], x["why"]) for x in body["attempts"]] == [("plan-b", "policy")]
    assert body["served_by_subscription"] == {"id": b.pk, "name": "plan-b"}
    assert body["subscription_switch"]["committed"] is True
    assert body["subscription_switch"]["why"]["refused"] == (
        "its routing policy does not allow its subscription"
    )
    agent.refresh_from_db()
    assert agent.subscription_id == b.pk


def test_a_subscription_only_agent_on_an_overage_plan_with_no_hard_stop_plan_is_refused(
    control: SimulatorControl, key: Callable[[], str], owner: User, owner_client: APIClient
) -> None:
    token = plan_token()
    control.register(token, kind="oauth", label="plan-ent")
    enterprise, _ = subscription_services.subscription_register(
        name="plan-ent", provider="anthropic", plan_type="enterprise", token=token
    )
    subscription_only(agent_on(owner, enterprise))
    key()

    body = task(owner_client)

    assert body["http_status"] == 429, body
    assert body["error_code"] == "billing"
    assert body["walk_stop"] == "policy"
    assert "subscription-only" in body["error_detail"]
    assert "'plan-ent' (Claude Enterprise, overage: bill_overage)" in body["error_detail"]
    assert messages_sent(control) == []
    assert key_requests(control) == []


def test_a_subscription_only_agent_refused_by_policy_names_the_earliest_reset_of_its_plans(
    control: SimulatorControl, key: Callable[[], str], owner: User, owner_client: APIClient
) -> None:
    token = plan_token()
    control.register(token, kind="oauth", label="plan-ent")
    enterprise, _ = subscription_services.subscription_register(
        name="plan-ent", provider="anthropic", plan_type="enterprise", token=token
    )
    b, _ = register_plan(control, "plan-b")
    c, _ = register_plan(control, "plan-c")
    subscription_only(agent_on(owner, enterprise))
    key()
    now = clock.now()
    # Fresh readings say both hard-stop plans refuse; plan-c's quota returns first.
    snapshots_write(
        {
            b.pk: limited(now=now, resets_in=timedelta(hours=3)),
            c.pk: limited(now=now, resets_in=timedelta(minutes=40)),
        }
    )

    body = task(owner_client)

    assert body["http_status"] == 429, body
    assert (body["error_code"], body["walk_stop"]) == ("billing", "policy")
    reset = datetime.fromisoformat(str(body["earliest_reset"]).replace("Z", "+00:00"))
    assert abs(reset - (now + timedelta(minutes=40))) < timedelta(seconds=5)
    assert "The earliest known reset is" in body["error_detail"]
    assert messages_sent(control) == []
    assert key_requests(control) == []


def test_a_subscription_only_agent_without_a_subscription_never_boots_or_runs_on_the_key(
    control: SimulatorControl, key: Callable[[], str], owner: User, owner_client: APIClient
) -> None:
    key()
    agent = AgentFactory.create(
        name="bot",
        owner=owner,
        routing_policy=RoutingPolicy.SUBSCRIPTION_ONLY,
        use_platform_api_key=True,
    )

    body = task(owner_client)

    assert body["http_status"] == 429, body
    assert body["error_code"] == "billing"
    assert body["walk_stop"] == "policy"
    assert "has no subscription" in body["error_detail"]
    assert messages_sent(control) == []
    assert key_requests(control) == []
    agent.refresh_from_db()
    assert agent.auth_mode == "none"  # it booted with no credential at all
    assert not Subscription.objects.exists()
