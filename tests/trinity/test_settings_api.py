from __future__ import annotations

import logging

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from trinity.selectors import system_settings_get

pytestmark = pytest.mark.django_db

SWITCHES = [
    ("/api/subscriptions/settings/auto-switch", "auto_switch_subscriptions"),
    ("/api/subscriptions/settings/api-key-fallback", "subscription_api_key_fallback"),
    ("/api/subscriptions/settings/headroom-auto-refresh", "subscription_headroom_auto_refresh"),
]
THRESHOLD = "/api/subscriptions/settings/headroom-alert-threshold"
KEY_URL = "/api/settings/platform-api-key"
API_KEY = "sk-ant-api03-" + "P" * 40


@pytest.mark.parametrize(("url", "field"), SWITCHES)
def test_switches_default_on_and_admin_toggles_them(
    admin_client_api: APIClient, url: str, field: str
) -> None:
    assert admin_client_api.get(url).json()["enabled"] is True
    response = admin_client_api.put(url, {"enabled": False}, format="json")
    assert response.status_code == 200
    assert response.json()["enabled"] is False
    assert getattr(system_settings_get(), field) is False


@pytest.mark.parametrize(("url", "field"), SWITCHES)
def test_non_admins_read_switches_but_cannot_change_them(
    owner_client: APIClient, other_client: APIClient, url: str, field: str
) -> None:
    for client in (owner_client, other_client):
        assert client.get(url).status_code == 200
        assert client.put(url, {"enabled": False}, format="json").status_code == 403
    assert getattr(system_settings_get(), field) is True


@pytest.mark.parametrize("body", [{}, {"enabled": "sometimes"}, {"enabled": None}])
def test_a_switch_rejects_bad_input(admin_client_api: APIClient, body: dict[str, object]) -> None:
    response = admin_client_api.put(SWITCHES[0][0], body, format="json")
    assert response.status_code == 400
    assert "enabled" in response.json()
    assert system_settings_get().auto_switch_subscriptions is True


def test_api_key_fallback_reports_whether_a_key_is_configured(admin_client_api: APIClient) -> None:
    url = SWITCHES[1][0]
    assert admin_client_api.get(url).json() == {"enabled": True, "key_configured": False}
    assert admin_client_api.put(KEY_URL, {"key": API_KEY}, format="json").status_code == 200
    assert admin_client_api.get(url).json() == {"enabled": True, "key_configured": True}
    # The switch is every provider's: the OpenAI key alone makes it bite too.
    assert admin_client_api.delete(KEY_URL).status_code in (200, 204)
    assert admin_client_api.get(url).json()["key_configured"] is False
    openai = KEY_URL + "/openai-codex"
    put = admin_client_api.put(openai, {"key": "sk-proj-" + "o" * 40}, format="json")
    assert put.status_code == 200, put.content
    assert admin_client_api.get(url).json() == {"enabled": True, "key_configured": True}


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (0, True),
        (50, True),
        (75, True),
        (99, True),
        (49, False),
        (1, False),
        (100, False),
        (-5, False),
        ("high", False),
        (True, False),
    ],
)
def test_alert_threshold_is_off_or_50_to_99(
    admin_client_api: APIClient, value: object, ok: bool
) -> None:
    response = admin_client_api.put(THRESHOLD, {"threshold": value}, format="json")
    assert response.status_code == (200 if ok else 400), response.content
    expected = value if ok else 75
    assert admin_client_api.get(THRESHOLD).json() == {"threshold": expected}


def test_an_out_of_range_threshold_is_bad_input_with_the_models_message() -> None:
    from trinity.errors import InvalidInput
    from trinity.services import system_setting_set

    with pytest.raises(InvalidInput) as refused:
        system_setting_set(name="headroom_alert_threshold", value=49)
    assert refused.value.field == "threshold"
    assert refused.value.message == (
        "The alert threshold is 0 (off) or a percentage from 50 to 99."
    )


def test_a_bug_in_the_threshold_check_is_a_500_with_its_traceback_not_bad_input(
    admin_user: User, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from trinity import services

    def broken_validator(value: int) -> None:
        # Stands in for a programming error in the validator: it must not be
        # reported to the operator as "bad input" with the bug's text.
        raise ZeroDivisionError("a bug in the validator")

    monkeypatch.setattr(services, "validate_alert_threshold", broken_validator)
    with pytest.raises(ZeroDivisionError):
        services.system_setting_set(name="headroom_alert_threshold", value=80)

    client = APIClient(raise_request_exception=False)
    client.force_login(admin_user)
    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = client.put(THRESHOLD, {"threshold": 80}, format="json")
    assert response.status_code == 500
    assert "a bug in the validator" not in response.content.decode()
    logged = [r for r in caplog.records if r.name == "django.request" and r.exc_info]
    assert logged and logged[0].exc_info is not None
    assert logged[0].exc_info[0] is ZeroDivisionError
    assert system_settings_get().headroom_alert_threshold == 75


def test_alert_threshold_is_admin_only_to_change(owner_client: APIClient) -> None:
    assert owner_client.get(THRESHOLD).json() == {"threshold": 75}
    assert owner_client.put(THRESHOLD, {"threshold": 80}, format="json").status_code == 403
    assert system_settings_get().headroom_alert_threshold == 75


class TestPlatformApiKey:
    def test_admin_sets_replaces_and_removes_it_without_ever_seeing_it(
        self, admin_client_api: APIClient
    ) -> None:
        response = admin_client_api.put(KEY_URL, {"key": API_KEY}, format="json")
        assert response.json() == {
            "configured": True,
            "fingerprint": API_KEY[-4:],
            "refusal": None,  # no refusal of this key closes its rung
        }
        assert API_KEY not in response.content.decode()
        assert system_settings_get().platform_api_key.reveal() == API_KEY
        replacement = "sk-ant-api03-" + "R" * 40
        admin_client_api.put(KEY_URL, {"key": replacement}, format="json")
        assert system_settings_get().platform_api_key.reveal() == replacement
        response = admin_client_api.delete(KEY_URL)
        assert response.json() == {"configured": False, "fingerprint": "", "refusal": None}
        assert system_settings_get().platform_api_key is None

    @pytest.mark.parametrize("client_name", ["owner_client", "other_client"])
    def test_non_admins_get_403_and_nothing_changes(
        self, request: pytest.FixtureRequest, client_name: str
    ) -> None:
        client: APIClient = request.getfixturevalue(client_name)
        assert client.put(KEY_URL, {"key": API_KEY}, format="json").status_code == 403
        assert client.delete(KEY_URL).status_code == 403
        assert client.get(KEY_URL).status_code == 403
        assert system_settings_get().platform_api_key is None

    @pytest.mark.parametrize("key", ["", "not-a-key", "sk-ant-oat01-" + "o" * 40])
    def test_a_bad_key_is_refused_by_field(self, admin_client_api: APIClient, key: str) -> None:
        response = admin_client_api.put(KEY_URL, {"key": key}, format="json")
        assert response.status_code == 400
        assert "key" in response.json()
        if key:
            assert key not in response.content.decode()
        assert system_settings_get().platform_api_key is None
