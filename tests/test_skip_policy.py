"""The skip policy (tests/skip_policy.py): under CI=true a skip fails unless it is listed.

Each case runs a small test file in a separate pytest process with the real plugin
loaded, so the policy is observed the way CI meets it: as the run's outcome and exit
status. The allow-list each inner run uses is its own; the suite's list is untouched.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.skip_policy import ALLOWED_SKIPS

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent

CASES = """
import pytest

@pytest.fixture
def service():
    pytest.skip("the service is down")

@pytest.mark.skipif(True, reason="needs a real Redis")
def test_skipped_by_a_mark():
    pass

def test_skipped_in_the_body():
    pytest.skip("not today")

def test_skipped_by_a_fixture(service):
    pass

def test_allowed():
    pytest.skip("a known reason")

def test_allowed_but_for_another_reason():
    pytest.skip("some other reason")

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_expected_to_fail():
    assert False

def test_that_runs():
    pass
"""

MODULE_SKIP = """
import pytest

pytest.skip("no CLI here", allow_module_level=True)

def test_never_collected():
    pass
"""


def inner_conftest(allowed: dict[str, str]) -> str:
    return (
        "pytest_plugins = ['tests.skip_policy']\n"
        "\n"
        "def pytest_configure(config):\n"
        "    from tests import skip_policy\n"
        "\n"
        "    skip_policy.ALLOWED_SKIPS.clear()\n"
        f"    skip_policy.ALLOWED_SKIPS.update({allowed!r})\n"
    )


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A bare pytest project that loads the policy plugin and allows one skip."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv("CI", raising=False)
    pytester.makeconftest(
        inner_conftest(
            {
                "test_cases.py::test_allowed": "a known reason",
                "test_cases.py::test_allowed_but_for_another_reason": "a known reason",
            }
        )
    )
    pytester.makepyfile(test_cases=CASES)
    return pytester


def run(pytester: pytest.Pytester) -> pytest.RunResult:
    # -p no:django: the inner project is not a Django project.
    return pytester.runpytest_subprocess("-p", "no:django", "-p", "no:cacheprovider", "-rA")


def test_an_unlisted_skip_fails_the_run_under_ci(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")

    result = run(inner)

    # A skip in setup (a mark, a fixture) fails there, so pytest counts it an error.
    result.assert_outcomes(passed=1, skipped=1, failed=2, errors=2, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["ERROR test_cases.py::test_skipped_by_a_mark*"])
    result.stdout.fnmatch_lines(["ERROR test_cases.py::test_skipped_by_a_fixture*"])
    result.stdout.fnmatch_lines(["FAILED test_cases.py::test_skipped_in_the_body*"])
    result.stdout.fnmatch_lines(["FAILED test_cases.py::test_allowed_but_for_another_reason*"])
    result.stdout.fnmatch_lines(["*skipped under CI=true: 'needs a real Redis'*"])


def test_a_module_that_skips_itself_fails_collection_under_ci(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner.makepyfile(test_module_skip=MODULE_SKIP)
    monkeypatch.setenv("CI", "true")

    result = run(inner)

    # pytest runs nothing once collection failed: loud, and the reason is printed.
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["ERROR test_module_skip.py*"])
    result.stdout.fnmatch_lines(["*skipped under CI=true: 'no CLI here'*"])


def test_only_the_listed_test_with_its_listed_reason_still_skips_under_ci(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")

    result = run(inner)

    result.stdout.fnmatch_lines(["SKIPPED * test_cases.py:*: a known reason"])
    result.stdout.fnmatch_lines(["FAILED test_cases.py::test_allowed_but_for_another_reason*"])
    result.stdout.no_fnmatch_line("FAILED test_cases.py::test_allowed -*")


def test_outside_ci_a_skip_stays_a_skip(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_module_skip=MODULE_SKIP)

    result = run(inner)

    result.assert_outcomes(passed=1, skipped=6, xfailed=1)
    assert result.ret == pytest.ExitCode.OK


def test_every_allowed_skip_names_a_test_in_the_suite() -> None:
    # A stale entry would allow a skip to any later test that takes the name.
    for nodeid, reason in ALLOWED_SKIPS.items():
        path, _, name = nodeid.partition("::")
        source = (REPO / path).read_text()
        assert re.search(rf"^def {re.escape(name)}\(", source, re.MULTILINE), nodeid
        assert reason in source, f"{nodeid} no longer skips for {reason!r}"


def test_the_suite_runs_under_the_skip_policy(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.has_plugin("tests.skip_policy")
