"""The suite's skip policy, loaded by tests/conftest.py as a pytest plugin.

With ``CI=true`` a skipped test fails the run, unless ``ALLOWED_SKIPS`` names it with
the exact reason it skips for. A test that skips in CI is a test that never runs, and
nobody sees it: the Claude Code CLI tests once skipped in every clean clone that way.
Outside CI a skip stays a skip, so a developer without a service can still run the rest.

This module imports nothing from Django, so the policy's own tests can load it into a
bare pytest run.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

# The only skips CI accepts: node id -> the reason it skips for, and why that is fine.
# CI always runs on Postgres and Redis (tests/backends.py refuses to fall back), so the
# tests that need a real Redis never skip there.
ALLOWED_SKIPS: dict[str, str] = {
    # Applies only to the embedded database cache, whose expiry follows the process
    # clock; Redis expires keys on its own clock, which time-machine cannot move. Its
    # Redis counterpart (test_a_snapshot_key_carries_a_seven_day_ttl_on_redis) runs.
    "tests/headroom/test_store.py::test_a_snapshot_lives_seven_days_on_the_embedded_cache": (
        "moves the embedded cache's clock; Redis keeps its own"
    ),
}


def in_ci() -> bool:
    """True when the run is a CI run (``CI`` set to 1/true/yes, as CI services do)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason a skipped report carries, without pytest's ``Skipped: `` prefix."""
    longrepr = report.longrepr
    message = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return message.removeprefix("Skipped: ")


def unexpected_skip(nodeid: str, reason: str) -> str | None:
    """The failure message for a skip CI does not accept, or None when it is allowed."""
    if ALLOWED_SKIPS.get(nodeid) == reason:
        return None
    return (
        f"skipped under CI=true: {reason!r}. A skip in CI hides a test that never runs; "
        "make it run here, or name it with this reason in ALLOWED_SKIPS "
        "(tests/skip_policy.py) and say why."
    )


def _enforce(report: pytest.TestReport | pytest.CollectReport) -> None:
    # An xfail is reported as a skip that carries `wasxfail`; it is not a skip.
    if not report.skipped or hasattr(report, "wasxfail") or not in_ci():
        return
    failure = unexpected_skip(report.nodeid, skip_reason(report))
    if failure is not None:
        report.outcome = "failed"
        report.longrepr = failure


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, Any]:
    """A skip in setup (skipif marks, fixtures) or in the test body."""
    report = yield
    _enforce(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    """A module-level ``pytest.skip(..., allow_module_level=True)`` skips at collection."""
    report = yield
    _enforce(report)
    return report
