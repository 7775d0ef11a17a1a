"""One provider simulator for this package (tests/conftest.py defines it)."""

from __future__ import annotations

from tests.conftest import simulator  # noqa: F401 - re-exported: one simulator per package
