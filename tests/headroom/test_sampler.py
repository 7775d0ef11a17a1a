"""The sampler against the real simulator: what it probes, how often, and how safely."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connections
from django.test import override_settings
from pytest_django.fixtures import Settings

from routing.headroom.reading import ReadingStatus
from simulator.control import SimulatorControl
from subscriptions.headroom import collectors, sampler
from subscriptions.headroom.collectors.common import Collected
from subscriptions.headroom.sampler import (
    ProbeTooSoon,
    headroom_history_prune,
    headroom_refresh,
    headroom_sweep,
)
from subscriptions.headroom.store import snapshot_read
from subscriptions.models import HeadroomSample
from tests.headroom.factories import HeadroomSampleFactory, plan_on, served
from tests.headroom.readings import T0
from tests.headroom.test_store import UNREACHABLE_REDIS
from trinity import services as trinity_services
from trinity.markers import marker_claim, marker_release
from trinity.models import Notification

# Transactional: probes run on worker threads with their own database connections,
# and on the embedded default the markers they claim live in the database cache.
pytestmark = pytest.mark.django_db(transaction=True)
SECOND = timedelta(seconds=1)


def at(instant: datetime) -> Callable[[], datetime]:
    """A clock stopped at ``instant``."""
    return lambda: instant


def ticking(*instants: datetime) -> Callable[[], datetime]:
    """A clock that answers ``instants`` in turn, then keeps answering the last."""
    queue = list(instants)
    lock = threading.Lock()

    def now() -> datetime:
        with lock:
            return queue.pop(0) if len(queue) > 1 else queue[0]

    return now


def _probed(sim: SimulatorControl) -> Counter[str]:
    """How many usage reads or probes the simulator served per credential label."""
    return Counter(str(r["credential"]) for r in served(sim))


class TestSweep:
    def test_it_probes_every_unread_subscription_once_and_records_each(
        self, sim: SimulatorControl
    ) -> None:
        plans = [plan_on(sim, five_hour=10 * n) for n in range(3)]

        report = headroom_sweep(clock=at(T0))

        assert (report.due, report.probed, report.busy) == (3, 3, 0)
        assert _probed(sim) == {p.name: 1 for p in plans}
        for plan in plans:
            stored = snapshot_read(plan.pk).get(plan.pk)
            assert stored is not None and stored.status is ReadingStatus.OK
        assert HeadroomSample.objects.count() == 3
        assert HeadroomSample.objects.get(subscription=plans[2]).five_hour == 20.0

    def test_a_fresh_reading_is_not_probed_again(self, sim: SimulatorControl) -> None:
        plan_on(sim)
        headroom_sweep(clock=at(T0))
        sim.clear_requests()

        report = headroom_sweep(clock=at(T0 + timedelta(seconds=269)))

        assert (report.due, report.probed) == (0, 0)
        assert served(sim) == []

    def test_limited_subscriptions_are_probed_again_sooner(self, sim: SimulatorControl) -> None:
        full = plan_on(sim, five_hour=100)
        plan_on(sim, five_hour=10)
        headroom_sweep(clock=at(T0))
        sim.clear_requests()

        report = headroom_sweep(clock=at(T0 + timedelta(seconds=60)))

        assert report.probed == 1
        assert _probed(sim) == {full.name: 1}

    def test_nothing_is_probed_while_auto_refresh_is_off(self, sim: SimulatorControl) -> None:
        plan_on(sim)
        trinity_services.system_setting_set(name="subscription_headroom_auto_refresh", value=False)

        report = headroom_sweep(clock=at(T0))

        assert report.skipped == "auto_refresh_off"
        assert served(sim) == []

    def test_a_sweep_does_nothing_while_another_holds_the_leader_marker(
        self, sim: SimulatorControl
    ) -> None:
        plan_on(sim)
        assert marker_claim(sampler.LEADER_MARKER, ttl=60, value="other-beat")

        assert headroom_sweep(clock=at(T0)).skipped == "leader_held"
        assert served(sim) == []

        marker_release(sampler.LEADER_MARKER, value="other-beat")
        assert headroom_sweep(clock=at(T0)).probed == 1

    def test_a_subscription_being_probed_elsewhere_is_not_probed_twice(
        self, sim: SimulatorControl
    ) -> None:
        busy, free = plan_on(sim), plan_on(sim)
        assert marker_claim(f"probe:{busy.pk}", ttl=60)

        report = headroom_sweep(clock=at(T0))

        assert (report.probed, report.busy) == (1, 1)
        assert _probed(sim) == {free.name: 1}

    def test_with_the_store_down_nothing_is_probed(self, sim: SimulatorControl) -> None:
        plan_on(sim)
        with override_settings(CACHES=UNREACHABLE_REDIS):
            report = headroom_sweep(clock=at(T0))
        assert report.skipped == "store_unreachable"
        assert served(sim) == []

    def test_probes_run_concurrently_but_never_above_the_bound(
        self, sim: SimulatorControl, settings: Settings, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        settings.TRINITY_HEADROOM_CONCURRENCY = 3
        for _ in range(9):
            plan_on(sim)
        sim.set_latency(150, scope="usage")
        in_flight, peak = 0, 0
        lock = threading.Lock()
        real: Callable[..., Collected] = collectors.read

        def counting(**kwargs: Any) -> Collected:
            nonlocal in_flight, peak
            with lock:
                in_flight += 1
                peak = max(peak, in_flight)
            try:
                return real(**kwargs)  # the real probe, over HTTP
            finally:
                with lock:
                    in_flight -= 1

        monkeypatch.setattr(collectors, "read", counting)

        report = headroom_sweep(clock=at(T0))

        assert report.probed == 9
        assert peak == 3

    def test_each_probe_has_its_own_timeout(
        self, sim: SimulatorControl, settings: Settings
    ) -> None:
        settings.TRINITY_HEADROOM_PROBE_TIMEOUT_SECONDS = 1
        plan_on(sim)
        sim.set_latency(1300, scope="usage")

        report = headroom_sweep(clock=at(T0))

        assert report.statuses == {"error": 1}
        assert HeadroomSample.objects.get().detail == "timeout"

    def test_a_failed_probe_never_replaces_an_answer(
        self, sim: SimulatorControl, settings: Settings
    ) -> None:
        plan = plan_on(sim, five_hour=100)
        headroom_sweep(clock=at(T0))
        settings.TRINITY_ANTHROPIC_BASE_URL = "http://127.0.0.1:9"

        headroom_sweep(clock=at(T0 + timedelta(minutes=2)))

        kept = snapshot_read(plan.pk).get(plan.pk)
        assert kept is not None and kept.status is ReadingStatus.RATE_LIMITED
        assert kept.fetched_at == T0
        assert list(HeadroomSample.objects.values_list("status", flat=True)) == [
            "rate_limited",
            "error",
        ]

    def test_one_broken_collector_does_not_end_the_sweep(
        self, sim: SimulatorControl, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        broken, fine = plan_on(sim), plan_on(sim)
        real = collectors.read

        def flaky(**kwargs: Any) -> Collected:
            if kwargs["label"] == broken.name:
                raise RuntimeError("parser bug")
            return real(**kwargs)

        monkeypatch.setattr(collectors, "read", flaky)

        report = headroom_sweep(clock=at(T0))

        assert report.statuses == {"error": 1, "ok": 1}
        assert _probed(sim) == {fine.name: 1}


@pytest.mark.django_db(transaction=True)
def test_two_beats_sweeping_at_once_probe_each_subscription_once(
    sim: SimulatorControl,
) -> None:
    plans = [plan_on(sim) for _ in range(4)]
    sim.set_latency(200, scope="usage")
    start = threading.Barrier(2)
    reports: list[sampler.SweepReport] = []

    def beat() -> None:
        start.wait()
        try:
            reports.append(headroom_sweep(clock=at(T0)))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=beat) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert _probed(sim) == {p.name: 1 for p in plans}
    assert sorted(r.probed for r in reports) == [0, 4]


class TestSlowProviders:
    """A sweep of slow or hanging providers still stores what answered, each reading
    at its own instant, and never probes a plan twice."""

    def test_each_reading_is_stored_as_its_probe_finishes(
        self, sim: SimulatorControl, settings: Settings, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        settings.TRINITY_HEADROOM_CONCURRENCY = 1
        first, second = plan_on(sim, five_hour=10), plan_on(sim, five_hour=20)
        seen_at_start: dict[str, tuple[bool, int]] = {}
        real = collectors.read

        def observing(**kwargs: Any) -> Collected:
            stored = snapshot_read(first.pk).get(first.pk) is not None
            seen_at_start[kwargs["label"]] = (stored, HeadroomSample.objects.count())
            return real(**kwargs)

        monkeypatch.setattr(collectors, "read", observing)

        headroom_sweep(clock=at(T0))

        # when the second probe started, the first reading was already in the store
        # and in history: a sweep cut short keeps what it read
        assert seen_at_start[second.name] == (True, 1)

    def test_each_reading_carries_the_instant_of_its_own_probe(
        self, sim: SimulatorControl, settings: Settings
    ) -> None:
        settings.TRINITY_HEADROOM_CONCURRENCY = 1
        first, second = plan_on(sim), plan_on(sim)

        headroom_sweep(clock=ticking(T0, T0 + 7 * SECOND, T0 + 19 * SECOND))

        stamps = dict(HeadroomSample.objects.values_list("subscription_id", "fetched_at"))
        assert stamps == {first.pk: T0 + 7 * SECOND, second.pk: T0 + 19 * SECOND}
        stored = snapshot_read(second.pk).get(second.pk)
        assert stored is not None and stored.fetched_at == T0 + 19 * SECOND

    def test_no_probe_starts_once_it_could_not_finish_inside_the_sweep(
        self, sim: SimulatorControl, settings: Settings
    ) -> None:
        settings.TRINITY_HEADROOM_CONCURRENCY = 1
        early, *late = [plan_on(sim) for _ in range(3)]
        bounds = sampler.configured_bounds()
        last_start = T0 + timedelta(seconds=bounds.starts_until)

        report = headroom_sweep(clock=ticking(T0, T0 + SECOND, last_start))

        assert (report.due, report.probed, report.late) == (3, 1, 2)
        assert _probed(sim) == {early.name: 1}
        assert HeadroomSample.objects.get().subscription_id == early.pk

    def test_a_sweep_releases_only_the_claims_it_holds(
        self, sim: SimulatorControl, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        plan = plan_on(sim)
        real = collectors.read

        def overtaken(**kwargs: Any) -> Collected:
            # this sweep's claim lapses mid-probe and another prober takes it
            cache.delete(f"marker:probe:{plan.pk}")
            assert marker_claim(f"probe:{plan.pk}", ttl=60, value="the-other-prober")
            return real(**kwargs)

        monkeypatch.setattr(collectors, "read", overtaken)

        headroom_sweep(clock=at(T0))

        assert cache.get(f"marker:probe:{plan.pk}") == "the-other-prober"

    def test_a_plan_another_sweep_probed_moments_ago_is_not_probed_again(
        self, sim: SimulatorControl, settings: Settings
    ) -> None:
        plan = plan_on(sim)
        headroom_sweep(clock=at(T0 - timedelta(minutes=10)))
        sim_url = settings.TRINITY_ANTHROPIC_BASE_URL
        # The first leader's probe fails: the stored answer stays (still due), and
        # only the history knows a probe just ran.
        settings.TRINITY_ANTHROPIC_BASE_URL = "http://127.0.0.1:9"
        headroom_sweep(clock=at(T0))
        settings.TRINITY_ANTHROPIC_BASE_URL = sim_url
        sim.clear_requests()

        report = headroom_sweep(clock=at(T0 + 5 * SECOND))

        assert (report.due, report.probed, report.recent) == (1, 0, 1)
        assert served(sim) == []
        assert HeadroomSample.objects.filter(subscription=plan).count() == 2
        assert headroom_sweep(clock=at(T0 + 2 * timedelta(minutes=1))).probed == 1

    def test_the_usage_endpoints_retry_after_holds_off_every_probe_of_that_plan(
        self, sim: SimulatorControl
    ) -> None:
        plan, other = plan_on(sim), plan_on(sim)
        headroom_sweep(clock=at(T0 - timedelta(minutes=10)))
        assert plan.token is not None
        sim.throttle_usage(plan.token.reveal(), seconds=600)
        sim.clear_requests()

        first = headroom_sweep(clock=at(T0))
        assert first.statuses == {"error": 1, "ok": 1}
        # the throttled plan got one usage request and no 1-token probe
        assert {(r["credential"], r["path"], r["status"]) for r in served(sim)} == {
            (other.name, "/api/oauth/usage", 200),
            (plan.name, "/api/oauth/usage", 429),
        }
        sim.clear_requests()

        held = headroom_sweep(clock=at(T0 + timedelta(minutes=9)))
        assert (held.due, held.deferred, held.probed) == (2, 1, 1)
        with pytest.raises(ProbeTooSoon) as refused:
            headroom_refresh(subscription=plan, now=T0 + timedelta(minutes=9))
        assert refused.value.retry_after == 60
        assert _probed(sim) == {other.name: 1}
        sim.clear_requests()

        sim.advance_clock(600)
        after = headroom_sweep(clock=at(T0 + timedelta(minutes=10)))
        assert (after.probed, after.statuses) == (1, {"ok": 1})
        assert _probed(sim) == {plan.name: 1}


class TestBounds:
    """Every TTL and time limit comes from one bound: how long one probe can take."""

    @pytest.mark.parametrize(
        ("timeout", "interval", "probe", "starts_until", "sweep"),
        [
            # two requests (usage, then the 1-token probe), each connect + read
            (10, 300, 45, 255, 300),
            (1, 30, 9, 21, 30),
            # a period too short for two probes in a row stretches the sweep
            (20, 60, 85, 85, 170),
        ],
    )
    def test_the_sweep_bounds_derive_from_the_probe_bound(
        self, timeout: int, interval: int, probe: int, starts_until: int, sweep: int
    ) -> None:
        bounds = sampler.sweep_bounds(timeout=timeout, interval=interval)

        assert (bounds.probe, bounds.starts_until, bounds.sweep) == (probe, starts_until, sweep)
        # a live prober's claim never lapses, nor a live sweep's leader marker
        assert bounds.claim_ttl > bounds.probe
        assert bounds.leader_ttl > bounds.sweep == bounds.starts_until + bounds.probe
        assert bounds.sweep < bounds.soft_time_limit < bounds.time_limit

    def test_the_sweep_task_limits_are_the_derived_ones(self) -> None:
        from subscriptions.tasks import sweep_headroom

        bounds = sampler.configured_bounds()
        assert (sweep_headroom.soft_time_limit, sweep_headroom.time_limit) == (
            bounds.soft_time_limit,
            bounds.time_limit,
        )


class TestRefresh:
    def test_it_probes_now_and_records_the_reading(self, sim: SimulatorControl) -> None:
        plan = plan_on(sim, seven_day=33)

        reading = headroom_refresh(subscription=plan, now=T0)

        assert reading.windows["seven_day"].utilization == 33.0
        assert snapshot_read(plan.pk).get(plan.pk) == reading
        assert HeadroomSample.objects.filter(subscription=plan).count() == 1

    def test_a_second_probe_inside_the_floor_is_refused_with_the_wait(
        self, sim: SimulatorControl
    ) -> None:
        plan = plan_on(sim)
        headroom_refresh(subscription=plan, now=T0)

        with pytest.raises(ProbeTooSoon) as refused:
            headroom_refresh(subscription=plan, now=T0 + timedelta(seconds=45))
        assert refused.value.retry_after == 15
        assert "once every 60 s" in refused.value.message

        headroom_refresh(subscription=plan, now=T0 + timedelta(seconds=60))
        assert HeadroomSample.objects.filter(subscription=plan).count() == 2

    def test_a_sweep_probe_counts_toward_the_floor(self, sim: SimulatorControl) -> None:
        plan = plan_on(sim)
        headroom_sweep(clock=at(T0))
        with pytest.raises(ProbeTooSoon):
            headroom_refresh(subscription=plan, now=T0 + 59 * SECOND)

    def test_it_is_refused_while_another_probe_of_it_runs(self, sim: SimulatorControl) -> None:
        plan = plan_on(sim)
        assert marker_claim(f"probe:{plan.pk}", ttl=60)
        with pytest.raises(ProbeTooSoon, match="already running"):
            headroom_refresh(subscription=plan, now=T0)
        assert served(sim) == []

    def test_a_broken_collector_is_recorded_as_an_error_that_counts_toward_the_floor(
        self, sim: SimulatorControl, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        plan = plan_on(sim)

        def broken(**kwargs: Any) -> Collected:
            raise RuntimeError("parser bug")

        monkeypatch.setattr(collectors, "read", broken)

        reading = headroom_refresh(subscription=plan, now=T0)

        assert (reading.status, reading.detail) == (ReadingStatus.ERROR, "collector failed")
        assert HeadroomSample.objects.get(subscription=plan).detail == "collector failed"
        # the operator cannot hammer a broken collector: the error is a probe like any other
        with pytest.raises(ProbeTooSoon):
            headroom_refresh(subscription=plan, now=T0 + 30 * SECOND)

    def test_with_the_store_down_the_history_still_enforces_the_floor(
        self, sim: SimulatorControl
    ) -> None:
        plan = plan_on(sim)
        with override_settings(CACHES=UNREACHABLE_REDIS):
            reading = headroom_refresh(subscription=plan, now=T0)
            with pytest.raises(ProbeTooSoon):
                headroom_refresh(subscription=plan, now=T0 + 30 * SECOND)
        assert reading.status is ReadingStatus.OK
        assert HeadroomSample.objects.filter(subscription=plan).count() == 1


class TestAlerts:
    def test_crossing_the_threshold_notifies_once_per_window_and_level(
        self,
        sim: SimulatorControl,
        django_capture_on_commit_callbacks: Any,
    ) -> None:
        plan = plan_on(sim, seven_day=80)
        token = plan.token.reveal() if plan.token else ""
        with django_capture_on_commit_callbacks(execute=True):
            headroom_sweep(clock=at(T0))
        with django_capture_on_commit_callbacks(execute=True):
            headroom_sweep(clock=at(T0 + timedelta(minutes=5)))  # still 80%: nothing new
        sim.set_usage(token, "seven_day", percent=92)
        with django_capture_on_commit_callbacks(execute=True):
            headroom_sweep(clock=at(T0 + timedelta(minutes=10)))

        notes = list(Notification.objects.order_by("created_at"))
        assert [(n.level, n.data["window"]) for n in notes] == [
            ("warning", "seven_day"),
            ("critical", "seven_day"),
        ]
        assert notes[0].subscription_id == plan.pk
        assert plan.name in notes[0].title and "80.0%" in notes[0].title

    def test_a_jittered_reset_alerts_once_per_window_instance(
        self, sim: SimulatorControl, django_capture_on_commit_callbacks: Any
    ) -> None:
        plan = plan_on(sim, five_hour=100)
        token = plan.token.reveal() if plan.token else ""
        # The provider reports the one reset as :00, :59 and :57 on successive polls.
        sim.set_reset_jitter(token, [0, -1, -3])
        for minutes in (0, 5, 10):
            with django_capture_on_commit_callbacks(execute=True):
                headroom_sweep(clock=at(T0 + timedelta(minutes=minutes)))

        notes = Notification.objects.filter(kind="headroom_alert", data__window="five_hour")
        assert [(n.level, n.title) for n in notes] == [
            ("critical", f"{plan.name}: 5-hour window at 100.0%")
        ]

    def test_a_threshold_of_zero_sends_nothing(
        self, sim: SimulatorControl, django_capture_on_commit_callbacks: Any
    ) -> None:
        plan_on(sim, seven_day=99)
        trinity_services.system_setting_set(name="headroom_alert_threshold", value=0)
        with django_capture_on_commit_callbacks(execute=True):
            headroom_sweep(clock=at(T0))
        assert not Notification.objects.exists()


def test_history_older_than_thirty_days_is_pruned() -> None:
    old = HeadroomSampleFactory.create(fetched_at=T0 - timedelta(days=30) - SECOND)
    edge = HeadroomSampleFactory.create(fetched_at=T0 - timedelta(days=30))
    recent = HeadroomSampleFactory.create(fetched_at=T0 - timedelta(days=1))

    assert headroom_history_prune(now=T0) == 1

    remaining = set(HeadroomSample.objects.values_list("pk", flat=True))
    assert remaining == {edge.pk, recent.pk}
    assert old.pk not in remaining
