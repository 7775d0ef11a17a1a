"""The panel words every reason the walk records (a new reason without a label would
show as a bare code in the Activity trail)."""

from __future__ import annotations

import re
from pathlib import Path

from routing.walk import Why

WALK_JS = Path(__file__).resolve().parents[2] / "frontend" / "src" / "walk.js"


def test_every_walk_reason_has_a_label_in_the_panel() -> None:
    source = WALK_JS.read_text()
    block = source[source.index("export const WHY_LABELS") :]
    block = block[: block.index("};")]
    labelled = set(re.findall(r"^\s*(\w+):", block, flags=re.MULTILINE))
    assert {why.value for why in Why} <= labelled
