"""The admin's policy is a ceiling on the platform key: the system-wide fallback switch
bounds every agent (its turn, its boot credential, the explainer, the API), and an
agent's own flag and budgets only narrow the fleet's, never widen them."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import TestCase
from rest_framework.test import APIClient

from agents import lifecycle
from agents.models import Agent, Runtime
from execution.explain.explanation import routing_explain
from routing import policy
from routing.policy import KeyRefusal, key_verdict, tightest_budget
from subscriptions.key_rung_state import KeyClosed, key_rung_state
from subscriptions.key_spend import agent_budgets, key_budget_closed, key_spend_reserve
from tests.agents.factories import AgentFactory
from trinity import services as trinity_services
from trinity.selectors import system_settings_get

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
KEY = "sk-ant-api03-" + "c" * 40
D = Decimal


# The verdict as a table (pure)

ON, OFF = True, False


@pytest.mark.parametrize(
    ("fallback", "configured", "routing", "flag", "runtime", "refusal"),
    [
        (ON, True, "thrifty", None, "claude-code", None),
        (ON, True, "thrifty", True, "claude-code", None),
        (ON, True, "pinned", None, "anthropic-api", None),
        # The admin's switch off is a ceiling: the agent's own True does not widen it.
        (OFF, True, "thrifty", True, "claude-code", KeyRefusal.FALLBACK_OFF),
        (OFF, True, "thrifty", None, "claude-code", KeyRefusal.FALLBACK_OFF),
        (OFF, False, "subscription-only", False, "codex", KeyRefusal.FALLBACK_OFF),
        (ON, False, "thrifty", True, "claude-code", KeyRefusal.NO_KEY),
        (ON, True, "subscription-only", True, "claude-code", KeyRefusal.POLICY),
        (ON, True, "thrifty", False, "claude-code", KeyRefusal.AGENT_OPTED_OUT),
        (ON, True, "thrifty", None, "codex", KeyRefusal.NOT_A_CLAUDE_RUNTIME),
    ],
)
def test_the_key_verdict_puts_the_admins_switch_above_the_agents_flag(
    fallback: bool,
    configured: bool,
    routing: str,
    flag: bool | None,
    runtime: str,
    refusal: KeyRefusal | None,
) -> None:
    verdict = key_verdict(
        fallback_on=fallback,
        key_configured=configured,
        routing_policy=routing,
        agent_flag=flag,
        runtime=runtime,
    )
    assert verdict.refusal is refusal
    assert verdict.allowed is (refusal is None)


@pytest.mark.parametrize(
    ("caps", "tightest"),
    [
        ((), None),
        ((None, None, None), None),
        ((D("5"), None), D("5")),
        ((None, D("2")), D("2")),
        ((D("5"), D("2"), D("9")), D("2")),
        ((D("0"), D("2")), D("0")),  # zero is a cap (closed), not "no cap"
        ((D("2.00"), D("2")), D("2")),
    ],
)
def test_the_tightest_budget_wins_and_none_is_no_cap(
    caps: tuple[Decimal | None, ...], tightest: Decimal | None
) -> None:
    assert tightest_budget(caps) == tightest


def test_every_runtime_can_run_on_its_providers_key() -> None:
    assert policy.KEY_RUNTIMES == set(Runtime.values)


@pytest.mark.parametrize(
    ("is_admin", "fields", "refused"),
    [
        (False, ["key_budget_daily_usd"], []),
        (False, ["admin_key_budget_daily_usd", "model"], ["admin_key_budget_daily_usd"]),
        (False, ["admin_key_budget_monthly_usd"], ["admin_key_budget_monthly_usd"]),
        (True, ["admin_key_budget_daily_usd", "admin_key_budget_monthly_usd"], []),
    ],
)
def test_only_an_admin_writes_the_admins_caps(
    is_admin: bool, fields: list[str], refused: list[str]
) -> None:
    assert policy.agent_fields_refused(fields=fields, is_admin=is_admin) == refused


# Every caller asks the verdict


@pytest.mark.django_db
class TestTheSwitchOffKeepsEveryCallerOffTheKey:
    @pytest.fixture(autouse=True)
    def key_configured_then_switched_off(self) -> None:
        trinity_services.platform_api_key_set(key=KEY)
        trinity_services.system_setting_set(name="subscription_api_key_fallback", value=False)

    def test_an_agent_that_wants_the_key_does_not_boot_on_it(self) -> None:
        agent: Agent = AgentFactory.create(use_platform_api_key=True)
        assert lifecycle.baseline_rung(agent) is None
        mode, spec = lifecycle.spawn_spec(agent)
        assert mode == "none"
        assert "ANTHROPIC_API_KEY" not in spec.credentials
        assert KEY not in str(spec.credentials)

    def test_the_walks_key_rung_is_closed_by_the_switch(self) -> None:
        agent: Agent = AgentFactory.create(use_platform_api_key=True)
        state = key_rung_state(agent=agent, system=system_settings_get(), now=NOW)
        assert state.closed is KeyClosed.FALLBACK_OFF

    def test_the_explainer_does_not_route_an_unassigned_agent_to_the_key(self) -> None:
        agent: Agent = AgentFactory.create(use_platform_api_key=True)
        explanation = routing_explain(agent=agent, now=NOW)
        assert explanation.first is None
        assert explanation.key.closed == KeyClosed.FALLBACK_OFF

    def test_the_api_reports_the_effective_value_not_the_agents_wish(
        self, owner: User, owner_client: APIClient
    ) -> None:
        AgentFactory.create(name="bot", owner=owner, use_platform_api_key=True)
        data = owner_client.get("/api/agents/bot").json()
        assert data["platform_key"] == {"allowed": False, "reason": "fallback_off"}
        trinity_services.system_setting_set(name="subscription_api_key_fallback", value=True)
        data = owner_client.get("/api/agents/bot").json()
        assert data["platform_key"] == {"allowed": True, "reason": None}


@pytest.mark.django_db
def test_the_agents_true_is_unset_on_the_wire(owner_client: APIClient) -> None:
    """True cannot widen the system's switch, so it is stored as what it means."""
    created = owner_client.post(
        "/api/agents", {"name": "bot", "use_platform_api_key": True}, format="json"
    )
    assert created.status_code == 201, created.json()
    assert created.json()["use_platform_api_key"] is None
    assert Agent.objects.get(name="bot").use_platform_api_key is None
    narrowed = owner_client.patch("/api/agents/bot", {"use_platform_api_key": False}, format="json")
    assert narrowed.json()["use_platform_api_key"] is False


@pytest.mark.django_db
def test_turning_the_switch_off_reapplies_the_credentials_of_agents_booted_on_the_key(
    admin_client_api: APIClient,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agents import tasks as agent_tasks

    on_key: Agent = AgentFactory.create(name="on-key", process_state="running", auth_mode="api_key")
    on_plan: Agent = AgentFactory.create(
        name="on-plan", process_state="running", auth_mode="subscription"
    )
    AgentFactory.create(name="stopped", process_state="stopped", auth_mode="api_key")
    applied: list[int] = []
    monkeypatch.setattr(agent_tasks.apply_credentials, "delay", applied.append)
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client_api.put(
            "/api/subscriptions/settings/api-key-fallback", {"enabled": False}, format="json"
        )
    assert response.status_code == 200
    assert applied == [on_key.pk]
    assert on_plan.pk not in applied


# Budgets: the tighter of the owner's, the admin's and the fleet's


AGENT_URL = "/api/agents/bot"


@pytest.mark.django_db
class TestTheAdminsBudgetCap:
    """Owner / other user / admin on the budget and flag fields."""

    @pytest.fixture
    def bot(self, owner: User) -> Agent:
        agent: Agent = AgentFactory.create(name="bot", owner=owner)
        return agent

    def test_the_owner_cannot_set_the_admins_cap(self, bot: Agent, owner_client: APIClient) -> None:
        response = owner_client.patch(
            AGENT_URL, {"admin_key_budget_daily_usd": "50"}, format="json"
        )
        assert response.status_code == 403, response.json()
        bot.refresh_from_db()
        assert bot.admin_key_budget_daily_usd is None

    def test_another_user_sees_no_agent_to_cap(self, bot: Agent, other_client: APIClient) -> None:
        for body in ({"admin_key_budget_daily_usd": "1"}, {"key_budget_daily_usd": "1"}):
            assert other_client.patch(AGENT_URL, body, format="json").status_code == 404
        bot.refresh_from_db()
        assert (bot.key_budget_daily_usd, bot.admin_key_budget_daily_usd) == (None, None)

    def test_an_operator_may_lower_but_not_clear_or_raise_the_admins_cap(
        self, bot: Agent, owner_client: APIClient, admin_client_api: APIClient
    ) -> None:
        set_ = admin_client_api.patch(
            AGENT_URL,
            {"admin_key_budget_daily_usd": "2.00", "admin_key_budget_monthly_usd": "20"},
            format="json",
        )
        assert set_.status_code == 200, set_.json()
        assert set_.json()["admin_key_budget_daily_usd"] == "2.00"

        def effective() -> tuple[str | None, str | None]:
            data = owner_client.get(AGENT_URL).json()
            return data["effective_key_budget_daily_usd"], data["effective_key_budget_monthly_usd"]

        assert effective() == ("2.00", "20.00")
        raised = owner_client.patch(
            AGENT_URL,
            {"key_budget_daily_usd": "50", "key_budget_monthly_usd": "500"},
            format="json",
        )
        assert raised.status_code == 200
        assert effective() == ("2.00", "20.00")  # raising their own cap widens nothing
        cleared = owner_client.patch(AGENT_URL, {"key_budget_daily_usd": None}, format="json")
        assert cleared.status_code == 200
        assert effective() == ("2.00", "20.00")  # nor does clearing it
        lowered = owner_client.patch(AGENT_URL, {"key_budget_daily_usd": "0.50"}, format="json")
        assert lowered.status_code == 200
        assert effective() == ("0.50", "20.00")  # lowering narrows
        bot.refresh_from_db()
        assert bot.admin_key_budget_daily_usd == D("2.00")

    def test_an_operator_cannot_create_an_agent_with_an_admins_cap(
        self, owner_client: APIClient, admin_client_api: APIClient
    ) -> None:
        body = {"name": "capped", "admin_key_budget_daily_usd": "9"}
        assert owner_client.post("/api/agents", body, format="json").status_code == 403
        assert not Agent.objects.filter(name="capped").exists()
        made = admin_client_api.post("/api/agents", body, format="json")
        assert made.status_code == 201, made.json()
        assert made.json()["admin_key_budget_daily_usd"] == "9.00"

    def test_the_fleets_cap_bounds_the_effective_budget_too(
        self, bot: Agent, owner_client: APIClient
    ) -> None:
        trinity_services.system_routing_settings_set(changes={"key_budget_daily_usd": D("3")})
        Agent.objects.filter(pk=bot.pk).update(key_budget_daily_usd=D("10"))
        assert owner_client.get(AGENT_URL).json()["effective_key_budget_daily_usd"] == "3.00"


@pytest.mark.django_db
@time_machine.travel(NOW, tick=False)
def test_the_admins_cap_closes_the_key_even_when_the_owner_cleared_their_own() -> None:
    agent: Agent = AgentFactory.create(
        key_budget_daily_usd=None, admin_key_budget_daily_usd=D("1.00")
    )
    system = system_settings_get()
    assert [(b.period, b.limit_usd) for b in agent_budgets(agent=agent, system=system)] == [
        ("day", D("1.00"))
    ]
    assert key_spend_reserve(agent=agent, system=system, usd=D("1.00"), now=NOW)
    closed = key_budget_closed(agent=agent, system=system, now=NOW)
    assert closed is not None
    assert closed.budget.limit_usd == D("1.00")


@pytest.mark.django_db
def test_the_owners_lower_cap_is_the_one_that_applies() -> None:
    agent: Agent = AgentFactory.create(
        key_budget_daily_usd=D("0.25"), admin_key_budget_daily_usd=D("1.00")
    )
    budgets = agent_budgets(agent=agent, system=system_settings_get())
    assert [(b.period, b.limit_usd) for b in budgets] == [("day", D("0.25"))]


class TestNoNewQueryOnTheServedPath(TestCase):
    def test_the_verdict_reads_only_what_is_in_memory(self) -> None:
        agent: Agent = AgentFactory.create(use_platform_api_key=True)
        system = system_settings_get()
        with self.assertNumQueries(0):
            policy.agent_key_verdict(agent, system)
            agent_budgets(agent=agent, system=system)
