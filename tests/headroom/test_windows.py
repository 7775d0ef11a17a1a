"""Table tests for the quota windows (``windows.py``), boundaries included."""

from __future__ import annotations

from datetime import timedelta

import pytest

from routing.headroom.windows import family_window, turn_windows, window_duration


@pytest.mark.parametrize(
    ("model", "window_name"),
    [
        ("claude-sonnet-4-5", "seven_day_sonnet"),
        ("claude-opus-4-1", "seven_day_opus"),
        ("claude-haiku-4-5", None),
        ("", None),
    ],
)
def test_a_model_names_its_family_window(model: str, window_name: str | None) -> None:
    assert family_window(model) == window_name


@pytest.mark.parametrize(
    ("name", "duration"),
    [
        ("five_hour", timedelta(hours=5)),
        ("seven_day", timedelta(days=7)),
        ("seven_day_opus", timedelta(days=7)),
        ("seven_day_sonnet", timedelta(days=7)),
        ("something_new", None),
    ],
)
def test_each_window_has_its_periods_length(name: str, duration: timedelta | None) -> None:
    assert window_duration(name) == duration


def test_a_turn_spends_the_core_windows_and_its_familys() -> None:
    assert turn_windows(None) == ("five_hour", "seven_day")
    assert turn_windows("seven_day_opus") == ("five_hour", "seven_day", "seven_day_opus")
