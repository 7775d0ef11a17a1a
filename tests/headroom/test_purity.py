"""The headroom rules are pure: no Django, no Redis, so their tests read as tables."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PURE = (
    "alert_crossings",
    "alternatives",
    "balance",
    "candidates",
    "classification",
    "exhaustion_forecast",
    "precomputed",
    "hysteresis",
    "instances",
    "limited_now",
    "probe_cadence",
    "ranking",
    "reading",
    "rebalance_plan",
    "recovery",
    "refusal_windows",
    "throttle",
    "windows",
)
_IMPURE = {"django", "redis", "django_redis", "rest_framework"}


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
    }


@pytest.mark.parametrize("name", PURE)
def test_a_rule_module_imports_neither_django_nor_redis_nor_an_impure_module(name: str) -> None:
    module = importlib.import_module(f"subscriptions.headroom.{name}")
    imported = _imported(Path(str(module.__file__)))
    assert not {i.split(".")[0] for i in imported} & _IMPURE, name
    headroom = {i.removeprefix("subscriptions.headroom.") for i in imported if "headroom." in i}
    assert headroom <= set(PURE), (name, headroom - set(PURE))
