"""A platform key per provider: the OpenAI key beside the Anthropic one, set, replaced
and cleared apart, each validated as its provider's key, write-only over REST
(owner / other user / admin), its fleet budgets beside the Anthropic key's."""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from routing import providers
from subscriptions.models import Provider
from trinity import services as trinity_services
from trinity.errors import InvalidInput
from trinity.selectors import system_settings_get

pytestmark = pytest.mark.django_db

ANTHROPIC_KEY = "sk-ant-api03-" + "A" * 40
OPENAI_KEY = "sk-proj-" + "O" * 40 + "open"
SERVICE_KEY = "sk-svcacct-" + "S" * 40 + "svca"
KEY_URL = "/api/settings/platform-api-key"
OPENAI_URL = "/api/settings/platform-api-key/openai-codex"
BUDGETS_URL = "/api/settings/platform-api-key/openai-codex/budgets"


def test_the_accessors_provider_values_are_the_subscription_providers() -> None:
    assert set(providers.SLOTS) == set(Provider.values)
    # The Anthropic key's fleet ledger keeps the scope its spend always had.
    from subscriptions.models import FLEET_SCOPE

    assert providers.fleet_scope(Provider.ANTHROPIC) == FLEET_SCOPE
    assert providers.fleet_scope(Provider.OPENAI_CODEX) != FLEET_SCOPE


def test_each_provider_reads_its_own_key_and_an_unknown_provider_none() -> None:
    system = system_settings_get()
    assert providers.platform_key(system, "anthropic") == (None, "")
    assert providers.platform_key(system, "openai-codex") == (None, "")

    trinity_services.platform_api_key_set(key=OPENAI_KEY, provider="openai-codex")
    system = system_settings_get()

    secret, fingerprint = providers.platform_key(system, "openai-codex")
    assert secret is not None and secret.reveal() == OPENAI_KEY and fingerprint == "open"
    assert providers.platform_key(system, "anthropic") == (None, "")
    assert not system.platform_api_key_configured  # the Anthropic key's flag
    assert providers.platform_key(system, "mistral") == (None, "")


def test_set_replace_and_clear_one_key_leave_the_other_alone() -> None:
    trinity_services.platform_api_key_set(key=ANTHROPIC_KEY)
    trinity_services.platform_api_key_set(key=OPENAI_KEY, provider="openai-codex")
    trinity_services.platform_api_key_set(key=SERVICE_KEY, provider="openai-codex")
    row = system_settings_get()
    assert row.openai_platform_api_key is not None
    assert row.openai_platform_api_key.reveal() == SERVICE_KEY
    assert row.openai_platform_api_key_fingerprint == "svca"
    assert row.platform_api_key is not None and row.platform_api_key.reveal() == ANTHROPIC_KEY

    trinity_services.platform_api_key_clear(provider="openai-codex")
    row = system_settings_get()
    assert row.openai_platform_api_key is None and row.openai_platform_api_key_fingerprint == ""
    assert row.platform_api_key is not None and row.platform_api_key_fingerprint == "AAAA"

    trinity_services.platform_api_key_set(key=OPENAI_KEY, provider="openai-codex")
    trinity_services.platform_api_key_clear()  # the Anthropic key only
    row = system_settings_get()
    assert row.platform_api_key is None
    assert row.openai_platform_api_key is not None


@pytest.mark.parametrize(
    ("provider", "value", "says"),
    [
        ("anthropic", "sk-proj-" + "p" * 40, "OpenAI platform key"),
        ("anthropic", "sk-svcacct-" + "p" * 40, "OpenAI platform key"),
        ("anthropic", "sk-ant-oat01-" + "o" * 40, "subscription"),
        ("anthropic", "not-a-key-" + "n" * 30, "starts with 'sk-ant-api'"),
        ("openai-codex", "sk-ant-api03-" + "a" * 40, "Anthropic platform API key"),
        ("openai-codex", "sk-ant-oat01-" + "o" * 40, "subscription"),
        ("openai-codex", "eyJhbGciOi" + "j" * 40, "subscription"),
        ("openai-codex", "pk-proj-" + "x" * 40, "starts with 'sk-'"),
        ("openai-codex", "sk-short", "starts with 'sk-'"),
        ("openai-codex", "sk-proj-" + "x" * 20 + " " + "x" * 20, "starts with 'sk-'"),
        ("openai-codex", "", "starts with 'sk-'"),
    ],
)
def test_each_key_is_validated_as_its_providers_naming_where_a_wrong_one_belongs(
    provider: str, value: str, says: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        trinity_services.platform_api_key_set(key=value, provider=provider)
    assert refused.value.field == "key"
    assert says in refused.value.message
    if value:
        assert value not in refused.value.message and value not in repr(refused.value)
    row = system_settings_get()
    assert row.platform_api_key is None and row.openai_platform_api_key is None


def test_a_provider_without_a_key_slot_is_refused() -> None:
    with pytest.raises(InvalidInput) as refused:
        trinity_services.platform_api_key_set(key=OPENAI_KEY, provider="mistral")
    assert refused.value.field == "provider"
    assert OPENAI_KEY not in refused.value.message


def test_the_key_never_shows_in_the_rows_repr_or_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG):
        row = trinity_services.platform_api_key_set(key=OPENAI_KEY, provider="openai-codex")
        logging.getLogger("trinity").info("settings %r %s", row.openai_platform_api_key, row)
    assert OPENAI_KEY not in repr(row.openai_platform_api_key)
    assert OPENAI_KEY not in caplog.text


class TestOpenAIKeyApi:
    def test_admin_sets_replaces_and_removes_it_without_ever_seeing_it(
        self, admin_client_api: APIClient
    ) -> None:
        assert admin_client_api.get(OPENAI_URL).json() == {
            "configured": False,
            "fingerprint": "",
            "refusal": None,
        }
        response = admin_client_api.put(OPENAI_URL, {"key": OPENAI_KEY}, format="json")
        assert response.status_code == 200
        assert response.json() == {"configured": True, "fingerprint": "open", "refusal": None}
        assert OPENAI_KEY not in response.content.decode()
        # Beside the Anthropic key, which stays unset.
        assert admin_client_api.get(KEY_URL).json()["configured"] is False

        response = admin_client_api.put(OPENAI_URL, {"key": SERVICE_KEY}, format="json")
        assert response.json()["fingerprint"] == "svca"
        assert SERVICE_KEY not in response.content.decode()

        response = admin_client_api.delete(OPENAI_URL)
        assert response.json() == {"configured": False, "fingerprint": "", "refusal": None}
        assert system_settings_get().openai_platform_api_key is None

    def test_removing_the_openai_key_leaves_the_anthropic_key(
        self, admin_client_api: APIClient
    ) -> None:
        admin_client_api.put(KEY_URL, {"key": ANTHROPIC_KEY}, format="json")
        admin_client_api.put(OPENAI_URL, {"key": OPENAI_KEY}, format="json")
        admin_client_api.delete(OPENAI_URL)
        assert admin_client_api.get(KEY_URL).json()["fingerprint"] == "AAAA"
        admin_client_api.put(OPENAI_URL, {"key": OPENAI_KEY}, format="json")
        admin_client_api.delete(KEY_URL)
        assert admin_client_api.get(OPENAI_URL).json()["fingerprint"] == "open"

    @pytest.mark.parametrize("client_name", ["owner_client", "other_client"])
    def test_non_admins_get_403_and_nothing_changes(
        self, request: pytest.FixtureRequest, client_name: str
    ) -> None:
        client: APIClient = request.getfixturevalue(client_name)
        assert client.put(OPENAI_URL, {"key": OPENAI_KEY}, format="json").status_code == 403
        assert client.get(OPENAI_URL).status_code == 403
        assert client.delete(OPENAI_URL).status_code == 403
        assert client.post(f"{OPENAI_URL}/retry").status_code == 403
        assert system_settings_get().openai_platform_api_key is None

    @pytest.mark.parametrize(
        "value", ["", "not-a-key", ANTHROPIC_KEY, "sk-ant-oat01-" + "o" * 40, "eyJ" + "e" * 40]
    )
    def test_a_value_that_is_no_openai_key_is_refused_by_field_without_echo(
        self, admin_client_api: APIClient, value: str
    ) -> None:
        response = admin_client_api.put(OPENAI_URL, {"key": value}, format="json")
        assert response.status_code == 400
        assert "key" in response.json()
        if value:
            assert value not in response.content.decode()
        assert system_settings_get().openai_platform_api_key is None

    def test_an_openai_key_sent_as_the_anthropic_key_is_sent_to_its_place(
        self, admin_client_api: APIClient
    ) -> None:
        response = admin_client_api.put(KEY_URL, {"key": OPENAI_KEY}, format="json")
        assert response.status_code == 400
        assert "OpenAI platform key" in response.content.decode()
        assert OPENAI_KEY not in response.content.decode()
        assert system_settings_get().platform_api_key is None


class TestOpenAIKeyBudgetsApi:
    def test_an_admin_sets_them_apart_from_the_anthropic_keys(
        self, admin_client_api: APIClient
    ) -> None:
        assert admin_client_api.get(BUDGETS_URL).json() == {
            "key_budget_daily_usd": None,
            "key_budget_monthly_usd": None,
        }
        response = admin_client_api.put(BUDGETS_URL, {"key_budget_daily_usd": "7.5"}, format="json")
        assert response.status_code == 200, response.content
        assert response.json() == {"key_budget_daily_usd": "7.50", "key_budget_monthly_usd": None}
        row = system_settings_get()
        assert row.openai_key_budget_daily_usd == Decimal("7.50")
        assert row.key_budget_daily_usd is None  # the Anthropic key's cap is its own
        routing = admin_client_api.get("/api/subscriptions/settings/routing").json()
        assert routing["key_budget_daily_usd"] is None

        admin_client_api.put(BUDGETS_URL, {"key_budget_monthly_usd": "100"}, format="json")
        admin_client_api.put(BUDGETS_URL, {"key_budget_daily_usd": None}, format="json")
        row.refresh_from_db()
        assert (row.openai_key_budget_daily_usd, row.openai_key_budget_monthly_usd) == (
            None,
            Decimal("100.00"),
        )

    @pytest.mark.parametrize(
        "body", [{"key_budget_daily_usd": "-1"}, {"key_budget_daily_usd": "x"}]
    )
    def test_a_bad_budget_is_refused(
        self, admin_client_api: APIClient, body: dict[str, str]
    ) -> None:
        assert admin_client_api.put(BUDGETS_URL, body, format="json").status_code == 400
        assert system_settings_get().openai_key_budget_daily_usd is None

    def test_non_admins_read_them_but_cannot_change_them(
        self, owner_client: APIClient, other_client: APIClient
    ) -> None:
        for client in (owner_client, other_client):
            assert client.get(BUDGETS_URL).status_code == 200
            response = client.put(BUDGETS_URL, {"key_budget_daily_usd": "1"}, format="json")
            assert response.status_code == 403
        assert system_settings_get().openai_key_budget_daily_usd is None


def test_the_schema_documents_the_openai_key_write_only(admin_client_api: APIClient) -> None:
    schema = admin_client_api.get("/api/schema/?format=json").json()
    paths = schema["paths"]
    assert {"get", "put", "delete"} <= set(paths[OPENAI_URL])
    assert "post" in paths[f"{OPENAI_URL}/retry"]
    assert {"get", "put"} <= set(paths[BUDGETS_URL])
    ok = paths[OPENAI_URL]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    name = ok["$ref"].removeprefix("#/components/schemas/")
    assert "key" not in schema["components"]["schemas"][name]["properties"]
