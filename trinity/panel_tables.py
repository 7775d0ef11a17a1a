"""The tables the panel reads from the Python side, as one JSON document.

The panel labels the walk's codes, checks a pasted credential's shape and an agent's
placement labels in the browser and offers the billing catalog's plan types in its
form; every table is Python's (``routing/walk_labels.py``,
``routing/credential_shapes.py``, ``trinity/node_labels.py``, ``routing/billing.py``
with ``routing/providers.py``'s labels, and the error codes' words here).
``manage.py panel_tables`` writes ``panel_tables()`` to ``TABLES_PATH``, committed, so
``npm run build`` and vitest need no Python; ``tests/trinity/test_panel_tables.py``
fails when the committed file differs from what this module generates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from routing import billing
from routing import credential_shapes as shapes
from routing.providers import PROVIDER_LABELS
from routing.walk_labels import STOP_LABELS, WHY_LABELS
from trinity import node_labels

# Relative to the repository root (``settings.BASE_DIR``).
TABLES_PATH: Final = Path("frontend") / "src" / "generated" / "tables.json"
REGENERATE: Final = ".venv/bin/python manage.py panel_tables"

# An attempt's or a turn's error code in words; the panel shows the code beside them.
# The codes are the agent server's (``trinity_contract/errors.py``) and the one the
# platform fails a lost turn with (``worker_lost``); a test pins that they are.
ERROR_LABELS: Final[dict[str, str]] = {
    "rate_limit": "rate limit",
    "auth": "credential refused",
    "billing": "billing",
    "model_unsupported": "model rejected",
    "timeout": "timed out",
    "container_fault": "container fault",
    "runtime_killed": "runtime killed",
    "upstream_error": "upstream error",
    "worker_lost": "worker lost",
    "cancelled": "cancelled",
}

# The error codes a failed turn ends with, which the Activity page filters on, in the
# order it lists them. They are the codes ``execution/api.py``'s ``ERROR_HTTP_STATUS``
# answers for (this floor cannot import that one; a test pins that they agree).
EXECUTION_ERROR_CODES: Final = (
    "billing",
    "auth",
    "model_unsupported",
    "timeout",
    "container_fault",
    "runtime_killed",
    "upstream_error",
    "worker_lost",
    "cancelled",
)


def plan_catalog() -> list[dict[str, Any]]:
    """Each provider with its label and its plan types (``billing.CATALOG``'s order);
    the server validates a plan type, this only fills the form's choices."""
    return [
        {
            "id": provider,
            "label": label,
            "plans": [
                {
                    "plan_type": entry.plan_type,
                    "label": entry.label,
                    "billing_class": entry.billing_class,
                    "overage": entry.overage,
                }
                for entry in billing.CATALOG.values()
                if entry.provider == provider
            ],
        }
        for provider, label in PROVIDER_LABELS.items()
    ]


def panel_tables() -> dict[str, Any]:
    """The document ``frontend/src/generated/tables.json`` holds."""
    return {
        "_generated": f"by `{REGENERATE}` from trinity/panel_tables.py; do not edit",
        "why_labels": {str(code): text for code, text in WHY_LABELS.items()},
        "stop_labels": {str(code): text for code, text in STOP_LABELS.items()},
        "error_labels": ERROR_LABELS,
        "execution_error_codes": list(EXECUTION_ERROR_CODES),
        "providers": plan_catalog(),
        "token_shapes": {
            "anthropic_plan_prefix": shapes.ANTHROPIC_PLAN_PREFIX,
            "anthropic_plan_min_body": shapes.ANTHROPIC_PLAN_MIN_BODY,
            "anthropic_oauth_prefix": shapes.ANTHROPIC_OAUTH_PREFIX,
            "anthropic_prefix": shapes.ANTHROPIC_PREFIX,
            "platform_api_key_prefix": shapes.PLATFORM_API_KEY_PREFIX,
            "openai_key_prefix": shapes.OPENAI_KEY_PREFIX,
            "platform_key_min_length": shapes.PLATFORM_KEY_MIN_LENGTH,
            "jwt_prefix": shapes.JWT_PREFIX,
            "jwt_pattern": shapes.JWT_SHAPE.pattern,
        },
        "node_labels": {
            "max_labels": node_labels.MAX_LABELS,
            "name_pattern": node_labels.NAME_PATTERN,
            "value_pattern": node_labels.VALUE_PATTERN,
            "shown": node_labels.SHOWN,
        },
    }


def panel_tables_json() -> str:
    """``panel_tables()`` as the committed file's exact text."""
    return json.dumps(panel_tables(), indent=2, ensure_ascii=False) + "\n"
