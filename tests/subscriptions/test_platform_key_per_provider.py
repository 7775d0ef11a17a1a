"""The key rung per provider: a turn reaches only its agent's provider's platform key
(Anthropic's for a Claude agent, OpenAI's for a Codex agent), a refusal of one key
never closes the other's rung, a retry clears only its own key's refusals, and each
key's fleet budgets count only its own spend.

The per-provider reads take the provider explicitly and are tested with provider
strings; the agent-level wiring (verdict, rung state, boot key) with Anthropic agents,
the only runtime there is yet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents import lifecycle
from agents.models import Agent
from routing.policy import KeyRefusal, agent_key_verdict
from routing.rung import RungKind
from subscriptions.key_refusals import key_latest_refusal, key_refusal_view
from subscriptions.key_rung_state import KeyClosed, key_rung_state
from subscriptions.key_spend import (
    Reservation,
    agent_scope,
    key_budget_closed,
    key_budget_lines,
    key_spend_reserve,
)
from subscriptions.models import FLEET_SCOPE, FailureKind, KeySpend, RateLimitEvent
from subscriptions.retry import platform_key_retry_now
from subscriptions.rung_secrets import key_rung
from subscriptions.services import record_rate_limit_event
from tests.agents.factories import AgentFactory
from trinity import services as trinity_services
from trinity.errors import Conflict
from trinity.models import SystemSettings
from trinity.selectors import system_settings_get

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
ANTHROPIC_KEY = "sk-ant-api03-" + "k" * 40  # …kkkk
OPENAI_KEY = "sk-proj-" + "o" * 40 + "open"  # …open
OPENAI = "openai-codex"
OPENAI_FLEET = "fleet:openai-codex"
D = Decimal


def _set_keys(*, anthropic: bool = True, openai: bool = True) -> SystemSettings:
    if anthropic:
        trinity_services.platform_api_key_set(key=ANTHROPIC_KEY)
    if openai:
        trinity_services.platform_api_key_set(key=OPENAI_KEY, provider=OPENAI)
    return system_settings_get()


def _key_refused(
    fingerprint: str, *, kind: str = FailureKind.AUTH, ago: timedelta = MINUTE
) -> None:
    record_rate_limit_event(
        agent_name="x",
        credential_kind="api_key",
        subscription_id=None,
        error_message="Credit balance is too low",
        failure_kind=kind,
        credential_fingerprint=fingerprint,
        now=NOW - ago,
    )


@pytest.fixture
def agent(owner: User) -> Agent:
    return AgentFactory.create(name="bot", owner=owner)


class TestTheKeyRungIsTheProvidersOwn:
    def test_each_provider_gets_its_own_key_named_for_which_key_it_is(self) -> None:
        system = _set_keys()

        anthropic = key_rung(system, provider="anthropic")
        openai = key_rung(system, provider=OPENAI)

        assert anthropic is not None and openai is not None
        assert anthropic.kind is openai.kind is RungKind.API_KEY
        assert anthropic.secret.reveal() == ANTHROPIC_KEY
        assert openai.secret.reveal() == OPENAI_KEY
        assert (anthropic.name, openai.name) == ("platform API key", "OpenAI platform key")
        # Each boots in its own provider's variable; the wire field is api_key for both.
        assert set(anthropic.env()) == {"ANTHROPIC_API_KEY"}
        assert set(openai.env()) == {"OPENAI_API_KEY"}
        assert anthropic.wire() == {"api_key": ANTHROPIC_KEY}
        assert openai.wire() == {"api_key": OPENAI_KEY}

    @pytest.mark.parametrize(
        ("anthropic", "openai", "provider"),
        [(False, True, "anthropic"), (True, False, OPENAI), (True, True, "mistral")],
    )
    def test_the_other_providers_key_is_never_offered(
        self, anthropic: bool, openai: bool, provider: str
    ) -> None:
        system = _set_keys(anthropic=anthropic, openai=openai)
        assert key_rung(system, provider=provider) is None

    def test_a_claude_agent_with_only_the_openai_key_has_no_key_at_all(self, agent: Agent) -> None:
        system = _set_keys(anthropic=False)

        assert agent_key_verdict(agent, system).refusal is KeyRefusal.NO_KEY
        state = key_rung_state(agent=agent, system=system, now=NOW)
        assert state.closed is KeyClosed.NO_KEY
        assert lifecycle.baseline_rung(agent) is None
        _, spec = lifecycle.spawn_spec(agent)
        assert spec.credentials == {}

    def test_a_claude_agent_with_both_keys_boots_and_walks_on_the_anthropic_key(
        self, agent: Agent
    ) -> None:
        system = _set_keys()

        assert key_rung_state(agent=agent, system=system, now=NOW).available
        baseline = lifecycle.baseline_rung(agent)
        assert baseline is not None and baseline.kind is RungKind.API_KEY
        assert baseline.secret.reveal() == ANTHROPIC_KEY
        assert baseline.name == "platform API key"  # the label every trail already shows
        mode, spec = lifecycle.spawn_spec(agent)
        assert mode == "api_key"
        assert {k: v.reveal() for k, v in spec.credentials.items()} == {
            "ANTHROPIC_API_KEY": ANTHROPIC_KEY
        }


class TestARefusalBelongsToItsKey:
    def test_an_openai_key_refusal_never_closes_the_anthropic_keys_rung(self, agent: Agent) -> None:
        system = _set_keys()
        _key_refused("open")

        assert key_rung_state(agent=agent, system=system, now=NOW).available
        assert key_latest_refusal(system, now=NOW, provider="anthropic") is None
        assert key_refusal_view(system, now=NOW, provider="anthropic") is None
        latest = key_latest_refusal(system, now=NOW, provider=OPENAI)
        assert latest == (FailureKind.AUTH, NOW - MINUTE)
        view = key_refusal_view(system, now=NOW, provider=OPENAI)
        assert view is not None and view["fingerprint"] == "open"
        assert view["reopens_at"] == NOW - MINUTE + timedelta(hours=2)

    def test_an_anthropic_key_refusal_never_closes_the_openai_keys_rung(self, agent: Agent) -> None:
        system = _set_keys()
        _key_refused("kkkk")

        state = key_rung_state(agent=agent, system=system, now=NOW)
        assert state.closed is KeyClosed.REFUSED_RECENTLY and state.fingerprint == "kkkk"
        assert key_latest_refusal(system, now=NOW, provider=OPENAI) is None
        assert key_refusal_view(system, now=NOW, provider=OPENAI) is None

    def test_a_refusal_of_unknown_key_counts_against_the_anthropic_key_only(
        self, agent: Agent
    ) -> None:
        # Rows recorded before fingerprints were kept were all made with the one key
        # there was then: Anthropic's.
        system = _set_keys()
        _key_refused("")

        assert not key_rung_state(agent=agent, system=system, now=NOW).available
        assert key_latest_refusal(system, now=NOW, provider=OPENAI) is None

    def test_without_an_openai_key_no_refusal_is_the_openai_keys(self) -> None:
        system = _set_keys(openai=False)
        _key_refused("")
        _key_refused("open")
        assert key_latest_refusal(system, now=NOW, provider=OPENAI) is None
        assert key_refusal_view(system, now=NOW, provider=OPENAI) is None

    def test_the_settings_api_shows_each_keys_own_refusal(
        self, admin_client_api: APIClient
    ) -> None:
        _set_keys()
        with time_machine.travel(NOW, tick=False):
            _key_refused("open", kind=FailureKind.RATE_LIMIT)
            openai = admin_client_api.get("/api/settings/platform-api-key/openai-codex").json()
            anthropic = admin_client_api.get("/api/settings/platform-api-key").json()
        assert openai["refusal"]["fingerprint"] == "open"
        assert openai["refusal"]["failure_kind"] == "rate_limit"
        assert anthropic["refusal"] is None


class TestRetryPerKey:
    def test_an_openai_key_retry_clears_only_the_openai_keys_refusals(self) -> None:
        _set_keys()
        _key_refused("open")
        _key_refused("kkkk")
        _key_refused("")  # unknown key: the Anthropic key's

        with time_machine.travel(NOW, tick=False):
            result = platform_key_retry_now(actor="ops", now=NOW, provider=OPENAI)

        assert (result.name, result.fingerprint, result.cleared) == (
            "OpenAI platform key",
            "open",
            1,
        )
        assert sorted(RateLimitEvent.objects.values_list("credential_fingerprint", flat=True)) == [
            "",
            "kkkk",
        ]

    def test_the_anthropic_key_retry_leaves_the_openai_keys_refusals(self) -> None:
        _set_keys()
        _key_refused("open")
        _key_refused("kkkk")

        result = platform_key_retry_now(actor="ops", now=NOW)

        assert (result.fingerprint, result.cleared) == ("kkkk", 1)
        assert list(RateLimitEvent.objects.values_list("credential_fingerprint", flat=True)) == [
            "open"
        ]

    def test_without_an_openai_key_its_retry_is_a_conflict(
        self, admin_client_api: APIClient
    ) -> None:
        _set_keys(openai=False)
        _key_refused("kkkk")
        with pytest.raises(Conflict, match="No OpenAI platform key"):
            platform_key_retry_now(actor="ops", now=NOW, provider=OPENAI)
        response = admin_client_api.post("/api/settings/platform-api-key/openai-codex/retry")
        assert response.status_code == 409
        assert RateLimitEvent.objects.count() == 1

    def test_an_admin_retries_the_openai_key_over_rest(self, admin_client_api: APIClient) -> None:
        _set_keys()
        with time_machine.travel(NOW, tick=False):
            _key_refused("open")
            response = admin_client_api.post("/api/settings/platform-api-key/openai-codex/retry")
        assert response.status_code == 200
        assert response.json()["fingerprint"] == "open" and response.json()["cleared"] == 1
        assert OPENAI_KEY not in response.content.decode()


class TestBudgetsPerProvider:
    def test_an_openai_key_turn_reserves_on_its_own_fleet_ledger(self, agent: Agent) -> None:
        system = _set_keys()

        admitted = key_spend_reserve(
            agent=agent, system=system, usd=D("0.40"), now=NOW, provider=OPENAI
        )

        assert isinstance(admitted, Reservation)
        assert {(r.scope, r.period) for r in KeySpend.objects.all()} == {
            (agent_scope(agent.pk), "day"),
            (agent_scope(agent.pk), "month"),
            (OPENAI_FLEET, "day"),
            (OPENAI_FLEET, "month"),
        }
        assert not KeySpend.objects.filter(scope=FLEET_SCOPE).exists()

    def test_spend_on_one_key_never_counts_against_the_others_budget(self, agent: Agent) -> None:
        system = _set_keys()
        system.key_budget_daily_usd = D("1.00")
        system.openai_key_budget_daily_usd = D("1.00")
        key_spend_reserve(agent=agent, system=system, usd=D("1.00"), now=NOW)  # Anthropic

        assert key_budget_closed(agent=agent, system=system, now=NOW) is not None
        assert key_budget_closed(agent=agent, system=system, now=NOW, provider=OPENAI) is None
        admitted = key_spend_reserve(
            agent=agent, system=system, usd=D("1.00"), now=NOW, provider=OPENAI
        )
        assert isinstance(admitted, Reservation)

        closed = key_budget_closed(agent=agent, system=system, now=NOW, provider=OPENAI)
        assert closed is not None and closed.budget.scope == OPENAI_FLEET
        assert closed.reason.startswith(
            "the OpenAI platform key's fleet-wide daily budget of $1.00 is taken"
        )

    def test_a_spent_openai_budget_leaves_the_claude_agents_key_rung_open(
        self, agent: Agent
    ) -> None:
        system = _set_keys()
        system.openai_key_budget_monthly_usd = D("0.50")
        key_spend_reserve(agent=agent, system=system, usd=D("0.50"), now=NOW, provider=OPENAI)

        assert key_budget_closed(agent=agent, system=system, now=NOW, provider=OPENAI)
        assert key_rung_state(agent=agent, system=system, now=NOW).available

    def test_the_agents_own_budget_stays_the_agents(self, agent: Agent) -> None:
        # One agent has one provider: its cap is its own whichever key it bills.
        system = _set_keys()
        agent.key_budget_daily_usd = D("0.30")
        key_spend_reserve(agent=agent, system=system, usd=D("0.30"), now=NOW, provider=OPENAI)
        closed = key_budget_closed(agent=agent, system=system, now=NOW)
        assert closed is not None and closed.budget.scope == agent_scope(agent.pk)

    def test_the_budget_lines_show_the_openai_fleet_once_its_key_or_cap_exists(
        self,
        agent: Agent,
        owner_client: APIClient,
        admin_client_api: APIClient,
    ) -> None:
        system = system_settings_get()
        assert [line.scope for line in key_budget_lines(agents=[], system=system, now=NOW)] == [
            FLEET_SCOPE,
            FLEET_SCOPE,
        ]
        system = _set_keys(anthropic=False)
        lines = key_budget_lines(agents=[], system=system, now=NOW)
        assert [(line.scope, line.period) for line in lines] == [
            (FLEET_SCOPE, "day"),
            (FLEET_SCOPE, "month"),
            (OPENAI_FLEET, "day"),
            (OPENAI_FLEET, "month"),
        ]
        key_spend_reserve(agent=agent, system=system, usd=D("0.20"), now=NOW, provider=OPENAI)

        with time_machine.travel(NOW, tick=False):
            mine = owner_client.get("/api/budgets").json()
            admins = admin_client_api.get("/api/budgets").json()

        openai_day = next(x for x in mine if x["scope"] == OPENAI_FLEET and x["period"] == "day")
        assert openai_day["provider"] == OPENAI
        # The fleet's spend is every owner's key turns: an admin's figure only.
        assert openai_day["reserved_usd"] is None
        admin_day = next(x for x in admins if x["scope"] == OPENAI_FLEET and x["period"] == "day")
        assert admin_day["reserved_usd"] == "0.200000"
        anthropic_day = next(x for x in admins if x["scope"] == FLEET_SCOPE)
        assert anthropic_day["provider"] == "anthropic"
        assert anthropic_day["reserved_usd"] == "0.000000"


def test_the_openai_key_is_retried_from_a_shell_too() -> None:
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="No OpenAI platform key"):
        call_command("credential_retry", openai_platform_key=True)
    _set_keys()
    _key_refused("open", ago=timedelta(0))
    _key_refused("kkkk", ago=timedelta(0))
    with time_machine.travel(NOW, tick=False):
        call_command("credential_retry", openai_platform_key=True, actor="ops")
    assert list(RateLimitEvent.objects.values_list("credential_fingerprint", flat=True)) == ["kkkk"]
