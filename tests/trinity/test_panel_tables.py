"""The panel's tables come from Python: the committed ``tables.json`` is what
``trinity/panel_tables.py`` generates, and each table covers the codes it describes."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import override_settings

import execution.api
from routing import billing
from routing.walk import Stop, Why
from subscriptions.models import Provider
from trinity import panel_tables
from trinity_contract.errors import ERROR_CODES


def test_the_committed_tables_are_what_python_generates() -> None:
    path = settings.BASE_DIR / panel_tables.TABLES_PATH
    committed = path.read_text(encoding="utf-8") if path.exists() else ""
    assert committed == panel_tables.panel_tables_json(), (
        f"{panel_tables.TABLES_PATH} is stale: run `{panel_tables.REGENERATE}` and commit it"
    )


def test_every_rung_reason_has_words_and_only_real_stops_do() -> None:
    tables = panel_tables.panel_tables()
    assert set(tables["why_labels"]) == {str(why) for why in Why} | {"legacy"}
    assert set(tables["stop_labels"]) <= {str(stop) for stop in Stop}


def test_the_error_tables_name_the_codes_a_turn_can_fail_with() -> None:
    codes = panel_tables.EXECUTION_ERROR_CODES
    assert codes == tuple(execution.api.ERROR_HTTP_STATUS)
    assert set(codes) <= set(panel_tables.ERROR_LABELS) <= ERROR_CODES | {"worker_lost"}


def test_the_plan_catalog_is_the_billing_catalog_under_the_models_providers() -> None:
    providers = {p["id"]: p for p in panel_tables.panel_tables()["providers"]}
    assert {pid: p["label"] for pid, p in providers.items()} == dict(Provider.choices)
    entries = {
        (pid, plan["plan_type"]): (plan["label"], plan["billing_class"], plan["overage"])
        for pid, p in providers.items()
        for plan in p["plans"]
    }
    assert entries == {
        key: (e.label, e.billing_class, e.overage) for key, e in billing.CATALOG.items()
    }


def test_the_command_writes_the_file_and_its_check_fails_on_a_stale_one(tmp_path: Path) -> None:
    with override_settings(BASE_DIR=tmp_path):
        with pytest.raises(CommandError, match="manage.py panel_tables"):
            call_command("panel_tables", "--check")
        call_command("panel_tables")
        call_command("panel_tables", "--check")
    written = (tmp_path / panel_tables.TABLES_PATH).read_text(encoding="utf-8")
    assert written == panel_tables.panel_tables_json()
