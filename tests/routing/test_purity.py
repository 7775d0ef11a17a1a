"""The routing core is pure: it imports only the standard library, ``trinity_contract``
and itself, so no rule in it can reach Django, a database driver, the cache, or an app
above it, and its tests read as tables. A folder, not a list of names: a module added
to ``routing/`` is held to it at once."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROUTING = ROOT / "routing"
# What a routing module may import, besides the standard library: numpy and SciPy are
# computation without I/O (the week plan's LP, ``routing/plan_ahead``), so they keep a
# rule as pure as the standard library does.
ALLOWED = {"__future__", "routing", "trinity_contract", "numpy", "scipy"}


def _modules() -> list[Path]:
    return sorted(ROUTING.rglob("*.py"))


def _imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every top-level name an import statement anywhere in ``tree`` loads, with its
    line: under ``if TYPE_CHECKING:`` too (an annotation naming a model is a
    dependency on it all the same)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.partition(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                yield node.lineno, "routing"  # a relative import stays inside the package
            else:
                yield node.lineno, (node.module or "").partition(".")[0]


def _offending(source: str) -> list[tuple[int, str]]:
    allowed = ALLOWED | set(sys.stdlib_module_names)
    return [(line, name) for line, name in _imported(ast.parse(source)) if name not in allowed]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_routing_module_imports_only_the_standard_library_and_the_contract(
    path: Path,
) -> None:
    assert _offending(path.read_text()) == []


@pytest.mark.parametrize(
    "source",
    [
        "import django",
        "from django.conf import settings",
        "import psycopg",
        "from redis import Redis",
        "from subscriptions.models import Subscription",
        "from trinity import clock",
        "from agents.models import Agent",
        "if TYPE_CHECKING:\n    from trinity.models import SystemSettings",
        "def f():\n    from execution import turn",
    ],
)
def test_the_check_finds_each_kind_of_impure_import(source: str) -> None:
    assert _offending(source) != []


def test_importing_the_whole_core_loads_nothing_of_django() -> None:
    """The same at run time, in a fresh interpreter: every module of ``routing/``
    imported, and not one module of Django, a driver, the cache or an app is loaded."""
    names = [
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in _modules()
    ]
    script = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = {'django', 'rest_framework', 'psycopg', 'redis', 'django_redis', 'celery',\n"
        "       'trinity', 'agents', 'subscriptions', 'execution', 'agent_server', 'simulator'}\n"
        "print(sorted({m.partition('.')[0] for m in sys.modules} & bad))\n"
    )
    found = subprocess.run(  # noqa: S603 - our own interpreter on our own script
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]", found.stderr
