"""Table tests for the sampler's cadence (``probe_cadence.py``), boundaries included."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from routing.headroom.probe_cadence import probe_due
from routing.headroom.reading import Reading
from tests.headroom.readings import T0, limited, reading

SECOND = timedelta(seconds=1)


INTERVAL = timedelta(seconds=300)
LIMITED_INTERVAL = timedelta(seconds=60)


@pytest.mark.parametrize(
    ("case", "subject", "last_failure_at", "due"),
    [
        ("never probed", None, None, True),
        ("healthy, just inside the slack", reading(age=timedelta(seconds=269)), None, False),
        (
            "healthy, at the interval less 30 s slack",
            reading(age=timedelta(seconds=270)),
            None,
            True,
        ),
        ("limited, before its shorter interval", limited(age=timedelta(seconds=53)), None, False),
        ("limited, at its interval less 10%", limited(age=timedelta(seconds=54)), None, True),
        (
            "healthy but refused since: limited cadence",
            reading(age=timedelta(seconds=60)),
            T0 - timedelta(seconds=30),
            True,
        ),
        (
            "healthy and refused before it: normal cadence",
            reading(age=timedelta(seconds=60)),
            T0 - timedelta(seconds=90),
            False,
        ),
        (
            "a window reset makes it due at once",
            limited(age=SECOND, resets_in=timedelta(0)),
            None,
            True,
        ),
    ],
)
def test_probe_due(
    case: str, subject: Reading | None, last_failure_at: datetime | None, due: bool
) -> None:
    result = probe_due(
        subject,
        now=T0,
        interval=INTERVAL,
        limited_interval=LIMITED_INTERVAL,
        last_failure_at=last_failure_at,
    )
    assert result is due, case
