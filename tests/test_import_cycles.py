"""No import cycles among the project's modules, not even ones hidden inside functions.

Static: every ``import`` statement in a module counts, wherever it stands (module
level, inside a function, a method, a ``try``), except under ``if TYPE_CHECKING:``
(never executed). A cycle is a strongly connected set of modules of more than one
module, or a module importing itself. Every cycle through a module of ``SCOPE`` fails
the test; widen ``SCOPE`` (up to ``PROJECT``) as other packages are cleaned up.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The packages whose modules the graph is built over (edges leaving them are ignored).
PROJECT = (
    "routing",
    "agents",
    "execution",
    "subscriptions",
    "trinity",
    "trinity_contract",
    "agent_server",
    "simulator",
    "gateway",
)
# The packages a cycle may not pass through.
SCOPE = PROJECT


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PROJECT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, outside ``if TYPE_CHECKING:`` blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]
) -> Iterator[str]:
    """The project modules an import statement loads (the most specific one known)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            anchor = module.split(".") if is_package else module.split(".")[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, *([base] if base else [])])
        names = [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
        names.append(base)
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            yield name


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (anywhere in its body)."""
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        edges = graph.setdefault(module, set())
        for node in _imports(tree):
            edges.update(t for t in _targets(node, module, is_package, known) if t != module)
            # A module importing its own package (``from execution import x`` in x's
            # sibling) is an edge to the package and to the sibling, both recorded.
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
                continue
            if child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _in_scope(module: str) -> bool:
    return any(module == p or module.startswith(f"{p}.") for p in SCOPE)


def test_no_import_cycle_passes_through_the_scoped_packages() -> None:
    offending = [c for c in cycles(import_graph()) if any(_in_scope(m) for m in c)]

    assert offending == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in offending)


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_the_cycle_finder_finds_cycles(
    graph: dict[str, set[str]], expected: list[list[str]]
) -> None:
    assert cycles(graph) == expected


def test_an_import_inside_a_function_counts() -> None:
    tree = ast.parse("def f():\n    from execution import tasks\n")
    found = list(_imports(tree))
    assert len(found) == 1
    targets = set(_targets(found[0], "execution.services", False, {"execution", "execution.tasks"}))
    assert targets == {"execution", "execution.tasks"}


def test_an_import_only_for_type_checking_does_not_count() -> None:
    tree = ast.parse("if TYPE_CHECKING:\n    from execution import tasks\n")
    assert list(_imports(tree)) == []


# The floors, lowest first: a module imports only its own floor and those below
# (``docs/architecture.md``, "Packages and the direction of imports"). No exceptions:
# the pure routing core sits just above ``trinity_contract``, so every app may ask it,
# and the root URL conf names the apps' URL modules by string (``include("agents.urls")``),
# which is no import.
FLOORS = (
    "trinity_contract",
    "routing",
    "trinity",
    "agents",
    "subscriptions",
    "gateway",
    "execution",
)


def _floor(module: str) -> int | None:
    top = module.partition(".")[0]
    return FLOORS.index(top) if top in FLOORS else None


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    found = []
    for module, targets in sorted(graph.items()):
        floor = _floor(module)
        for target in sorted(targets):
            reach = _floor(target)
            if floor is None or reach is None or reach <= floor:
                continue
            found.append((module, target))
    return found


def test_no_module_imports_a_floor_above_its_own() -> None:
    offending = upward_imports(import_graph())

    assert offending == [], "upward imports: " + "; ".join(f"{a} -> {b}" for a, b in offending)


def test_an_upward_import_is_found() -> None:
    assert upward_imports({"trinity.metrics": {"agents.models", "trinity.clock"}}) == [
        ("trinity.metrics", "agents.models")
    ]
