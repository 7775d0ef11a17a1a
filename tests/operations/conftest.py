"""Operations fixtures: the package's one simulator, and a scrape parser."""

from __future__ import annotations

from tests.conftest import simulator  # noqa: F401 - re-exported: one simulator per package
