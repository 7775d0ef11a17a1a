"""No function in the product, the simulator, deploy or bench code passes 60 lines.

A function that long does several things at once; the house rule is to split it by
question, so a reader finds each answer in one small place. Counted as Python counts
a definition: from `def` to its last line, decorators excluded.
Migrations are generated and tests are tables, so neither counts.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIMIT = 60


def checked_sources() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "*.py"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    return [
        REPO / name
        for name in listed.split("\0")
        if name
        and not name.startswith("tests/")
        and "/migrations/" not in name
        and (REPO / name).is_file()
    ]


def long_functions(source: str) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in `source` longer than LIMIT."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > LIMIT:
                found.append((node.name, length))
    return found


def test_the_counter_sees_a_long_function() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    assert long_functions(f"def long():\n{body}\n") == [("long", LIMIT + 1)]
    assert long_functions("def short():\n    return 1\n") == []


def test_no_function_passes_sixty_lines() -> None:
    found = {
        str(path.relative_to(REPO)): hits
        for path in checked_sources()
        if (hits := long_functions(path.read_text(encoding="utf-8")))
    }
    assert found == {}, "split these by question: " + repr(found)
