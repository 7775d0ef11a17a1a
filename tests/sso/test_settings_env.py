"""Single sign-on's settings fail loudly and by name when bad."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.apps import apps

from tests.trinity.test_settings_env import _boot
from trinity_contract.redaction import redact

GOOD = {
    "TRINITY_OIDC_DISCOVERY_URL": "https://id.example.test/realms/team",
    "TRINITY_OIDC_CLIENT_ID": "trinity",
}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {**GOOD, "TRINITY_OIDC_DISCOVERY_URL": "http://id.example.test"},
            "TRINITY_OIDC_DISCOVERY_URL must be an https URL",
        ),
        ({**GOOD, "TRINITY_OIDC_CLIENT_ID": ""}, "set TRINITY_OIDC_CLIENT_ID"),
        ({**GOOD, "TRINITY_OIDC_SCOPES": "email profile"}, "TRINITY_OIDC_SCOPES must include"),
        ({"TRINITY_LOCAL_PASSWORDS": "false"}, "TRINITY_LOCAL_PASSWORDS=false needs single"),
        ({**GOOD, "TRINITY_LOCAL_PASSWORDS": "maybe"}, "TRINITY_LOCAL_PASSWORDS='maybe'"),
    ],
)
def test_a_bad_sso_setting_stops_the_process_by_name(
    tmp_path: Path, overrides: dict[str, str], message: str
) -> None:
    booted = _boot(tmp_path, **overrides)
    assert booted.returncode != 0
    assert message in booted.stderr


def test_sso_with_passwords_off_and_a_loopback_provider_boots(tmp_path: Path) -> None:
    overrides = {
        **GOOD,
        "TRINITY_OIDC_DISCOVERY_URL": "http://127.0.0.1:9000/o",
        "TRINITY_LOCAL_PASSWORDS": "false",
        "TRINITY_BREAK_GLASS_USERS": "root, ops",
    }
    booted = _boot(tmp_path, **overrides)
    assert booted.returncode == 0, booted.stderr


def test_the_client_secret_is_redacted_from_everything_the_process_writes(settings: Any) -> None:
    secret = "oidc-client-secret-canary-" + "7f3a9c"
    settings.TRINITY_OIDC_CLIENT_SECRET = secret
    apps.get_app_config("sso").ready()
    assert secret not in redact(f"token endpoint refused client_secret={secret}")
