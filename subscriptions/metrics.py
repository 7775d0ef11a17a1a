"""The subscriptions' scrape-time gauges: each window's utilization and reset, and
how old each cached reading is.

Registered with ``trinity.metrics`` from ``subscriptions.apps``; computed at each
scrape from the cached snapshots (one cache round trip) and the subscriptions' names
(one query). Labels are subscription names only, never a token, a fingerprint or an id.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from subscriptions.headroom.store import snapshots_read
from subscriptions.models import Subscription
from trinity import clock

# The windows the gauges report, as their label names them.
WINDOWS = {"five_hour": "5h", "seven_day": "7d"}


class SubscriptionWindowsCollector(Collector):
    def describe(self) -> Iterable[Metric]:
        return list(self._families())

    def collect(self) -> Iterable[Metric]:
        utilization, reset, age = self._families()
        _observe(utilization, reset, age, now=clock.now())
        return [utilization, reset, age]

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "trinity_subscription_utilization_percent",
                "Each subscription's window utilization (5h, 7d) from its cached reading; "
                "absent once the window has reset or when there is no reading.",
                labels=["subscription", "window"],
            ),
            GaugeMetricFamily(
                "trinity_subscription_reset_seconds",
                "Seconds until each subscription's window (5h, 7d) resets, from its reading.",
                labels=["subscription", "window"],
            ),
            GaugeMetricFamily(
                "trinity_subscription_reading_age_seconds",
                "How old each subscription's cached reading is.",
                labels=["subscription"],
            ),
        )


def _observe(
    utilization: GaugeMetricFamily,
    reset: GaugeMetricFamily,
    age: GaugeMetricFamily,
    *,
    now: datetime,
) -> None:
    names = dict(Subscription.objects.values_list("pk", "name"))
    snapshots = snapshots_read(names)
    for pk, reading in snapshots.readings.items():
        name = names[pk]
        age.add_metric([name], max(0.0, (now - reading.fetched_at).total_seconds()))
        for key, window in WINDOWS.items():
            found = reading.windows.get(key)
            if found is None:
                continue
            if found.resets_at is not None:
                left = (found.resets_at - now).total_seconds()
                if left <= 0:
                    # A reading whose window already reset describes quota that no
                    # longer exists: no figure rather than a wrong one.
                    continue
                reset.add_metric([name, window], left)
            if found.utilization is not None:
                utilization.add_metric([name, window], found.utilization)
