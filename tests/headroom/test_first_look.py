"""A plan's usage is read when its token is new, and once as beat starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings

from simulator.control import SimulatorControl
from subscriptions.headroom import first_look
from subscriptions.models import HeadroomSample
from subscriptions.services import subscription_register
from tests.subscriptions.factories import plan_token
from trinity import services as trinity_services

ROOT = Path(__file__).resolve().parents[2]


def _register(sim: SimulatorControl, token: str, *, percent: float) -> int:
    sim.register(token, kind="oauth", label="first")
    sim.set_usage(token, "five_hour", percent=percent)
    subscription, _ = subscription_register(
        name="first", provider="anthropic", plan_type="max-20x", token=token
    )
    return subscription.pk


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager")
def test_a_registered_plan_is_probed_once_it_commits(sim: SimulatorControl) -> None:
    pk = _register(sim, plan_token(), percent=12)
    sample = HeadroomSample.objects.get(subscription_id=pk)
    assert sample.status == "ok"
    assert sample.windows["five_hour"]["utilization"] == 12


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager")
def test_a_rotated_token_is_probed_at_once_and_a_same_token_save_is_not(
    sim: SimulatorControl,
) -> None:
    first = plan_token()
    pk = _register(sim, first, percent=12)
    _register(sim, first, percent=40)  # the same token again: no new look
    assert HeadroomSample.objects.filter(subscription_id=pk).count() == 1
    _register(sim, plan_token(), percent=97)
    latest = HeadroomSample.objects.filter(subscription_id=pk).order_by("-fetched_at").first()
    assert latest is not None and latest.windows["five_hour"]["utilization"] == 97


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager")
def test_no_first_look_while_auto_refresh_is_off(sim: SimulatorControl) -> None:
    trinity_services.system_setting_set(name="subscription_headroom_auto_refresh", value=False)
    _register(sim, plan_token(), percent=12)
    assert not HeadroomSample.objects.exists()


def test_beat_sends_a_headroom_sweep_as_it_starts(tmp_path: Path) -> None:
    """A real beat on the filesystem broker: the sweep is queued within seconds, though
    its interval entry first fires one period (300 s) after start."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update({"DJANGO_SETTINGS_MODULE": "trinity.settings", "TRINITY_VAR_DIR": str(tmp_path)})
    queue = tmp_path / "broker" / "queue"
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "trinity", "beat", "-s", str(tmp_path / "sched")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        sent: list[str] = []
        while time.monotonic() < deadline and not sent:
            time.sleep(0.2)
            files = queue.glob("*") if queue.exists() else []
            sent = [f.read_text() for f in files if "headroom_sweep" in f.read_text()]
        assert beat.poll() is None, beat.stderr.read().decode() if beat.stderr else ""
    finally:
        os.killpg(beat.pid, signal.SIGTERM)
        beat.wait(timeout=30)
    assert len(sent) == 1 and '"task": "subscriptions.headroom_sweep"' in sent[0]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager")
def test_a_first_look_that_finds_no_upstream_is_tried_again_then_left(
    sim: SimulatorControl, settings: Settings
) -> None:
    settings.TRINITY_ANTHROPIC_BASE_URL = "http://127.0.0.1:9"  # nothing listens there
    pk = _register(sim, plan_token(), percent=12)
    statuses = list(
        HeadroomSample.objects.filter(subscription_id=pk).values_list("status", flat=True)
    )
    assert statuses == ["error"] * (first_look.RETRIES + 1)
