"""The agents' scrape-time gauge: how many agent servers are recorded running.

Registered with ``trinity.metrics`` from ``agents.apps``; computed at each scrape from
the agents table (one count), so no process keeps a stale copy.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agents.models import Agent, ProcessState


class AgentServersCollector(Collector):
    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        family.add_metric([], Agent.objects.filter(process_state=ProcessState.RUNNING).count())
        return [family]

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "trinity_agent_servers_up",
            "Agents whose server is recorded running (agents.supervise revives the "
            "ones that died every minute).",
        )
