"""The headroom tasks, their beat entries, and their settings."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.conf import settings

from simulator.control import SimulatorControl
from subscriptions.models import HeadroomSample
from subscriptions.tasks import prune_headroom_history, sweep_headroom
from tests.headroom.factories import HeadroomSampleFactory, plan_on
from tests.headroom.readings import T0
from trinity.celery import app

ROOT = Path(__file__).resolve().parents[2]


def test_the_sweep_runs_every_sample_interval_under_its_stable_name() -> None:
    schedule = app.conf.beat_schedule
    sweep = schedule["headroom-sweep"]
    assert sweep["task"] == "subscriptions.headroom_sweep"
    assert sweep["schedule"] == settings.TRINITY_HEADROOM_SAMPLE_SECONDS == 300
    assert sweep["options"]["expires"] == sweep["schedule"]
    prune = schedule["headroom-history-prune"]
    assert (prune["task"], prune["schedule"]) == ("subscriptions.headroom_history_prune", 3600)
    for name in ("subscriptions.headroom_sweep", "subscriptions.headroom_history_prune"):
        task = app.tasks[name]
        assert task.soft_time_limit and task.time_limit
        assert task.soft_time_limit < task.time_limit


@pytest.mark.django_db(transaction=True)
def test_the_sweep_task_probes_due_subscriptions(sim: SimulatorControl) -> None:
    plan = plan_on(sim)
    with time_machine.travel(T0, tick=False):
        result = sweep_headroom.apply().get()
    assert result == {"skipped": "", "due": 1, "probed": 1, "rebalanced": 0}
    assert HeadroomSample.objects.get().subscription_id == plan.pk


@pytest.mark.django_db(transaction=True)
def test_the_prune_task_drops_history_past_retention() -> None:
    HeadroomSampleFactory.create(fetched_at=T0 - timedelta(days=31))
    HeadroomSampleFactory.create(fetched_at=T0 - timedelta(days=2))
    with time_machine.travel(T0, tick=False):
        assert prune_headroom_history.apply().get() == 1
    assert HeadroomSample.objects.count() == 1


def _boot(tmp_path: Path, code: str, **overrides: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL"} and not k.startswith("TRINITY_HEADROOM_")
    }
    env.update({"DJANGO_SETTINGS_MODULE": "trinity.settings", "TRINITY_VAR_DIR": str(tmp_path)})
    env.update(overrides)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_sweep_cadence_comes_from_the_environment(tmp_path: Path) -> None:
    code = (
        "import django; django.setup(); from trinity.celery import app; "
        "e = app.conf.beat_schedule['headroom-sweep']; print(e['schedule'], e['options'])"
    )
    result = _boot(tmp_path, code, TRINITY_HEADROOM_SAMPLE_SECONDS="120")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "120 {'expires': 120}"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"TRINITY_HEADROOM_SAMPLE_SECONDS": "soon"}, "TRINITY_HEADROOM_SAMPLE_SECONDS"),
        ({"TRINITY_HEADROOM_CONCURRENCY": "0"}, "TRINITY_HEADROOM_CONCURRENCY"),
        (
            {
                "TRINITY_HEADROOM_SAMPLE_SECONDS": "60",
                "TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS": "90",
            },
            "TRINITY_HEADROOM_LIMITED_SAMPLE_SECONDS",
        ),
        ({"TRINITY_HEADROOM_PROBE_MODEL": "claude haiku"}, "TRINITY_HEADROOM_PROBE_MODEL"),
    ],
)
def test_a_bad_headroom_setting_fails_loudly_by_name(
    tmp_path: Path, overrides: dict[str, str], named: str
) -> None:
    result = _boot(tmp_path, "import django; django.setup()", **overrides)
    assert result.returncode != 0
    assert named in result.stderr
