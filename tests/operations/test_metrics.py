"""GET /metrics in-process: who may scrape, the scrape-time gauges (subscription
windows by name, agent servers up) and the sampler's probe counters against the real
simulator. The counters of real turns across two gunicorn workers are pinned in
test_metrics_e2e.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.db import OperationalError, connection
from django.test import Client
from pytest_django.fixtures import Settings

from agents.models import ProcessState
from simulator.control import SimulatorControl
from simulator.process import SimulatorProcess
from subscriptions.headroom.sampler import headroom_refresh
from subscriptions.headroom.store import snapshots_write
from tests.agents.factories import AgentFactory
from tests.headroom.factories import plan_on
from tests.headroom.readings import T0, reading
from tests.operations.scrape import parse, value
from tests.subscriptions.factories import SubscriptionFactory

pytestmark = pytest.mark.django_db
TOKEN = "metrics-token-0123456789abcdef"


def scrape(client: Client, **extra: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = client.get("/metrics", **extra)  # type: ignore[arg-type]
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return parse(response.content.decode())


@pytest.fixture
def client(settings: Settings) -> Client:
    """A scraper as Prometheus is one: from loopback, with the token."""
    return Client(HTTP_AUTHORIZATION=f"Bearer {settings.TRINITY_METRICS_TOKEN}")


class TestAccess:
    def test_without_the_token_loopback_is_refused_too(self) -> None:
        """Agents and every local user share loopback: an address proves nothing."""
        missing = Client().get("/metrics")
        assert missing.status_code == 401 and missing["WWW-Authenticate"] == "Bearer"
        assert b"trinity_" not in missing.content

    def test_only_the_tokens_bearer_scrapes(self, settings: Settings) -> None:
        settings.TRINITY_METRICS_TOKEN = TOKEN
        for wrong in (
            "Bearer " + "x" * len(TOKEN),
            f"Bearer {TOKEN[:-1]}",
            f"Token {TOKEN}",
            TOKEN,
            "Bearer ",
        ):
            refused = Client().get("/metrics", HTTP_AUTHORIZATION=wrong)
            assert refused.status_code == 401, wrong
        right = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert right.status_code == 200 and b"trinity_turns" in right.content

    def test_the_token_from_outside_the_allowed_networks_is_refused(self, client: Client) -> None:
        assert client.get("/metrics", REMOTE_ADDR="203.0.113.7").status_code == 403

    def test_any_address_with_the_token(self, settings: Settings) -> None:
        settings.TRINITY_METRICS_TOKEN = TOKEN
        settings.TRINITY_METRICS_ALLOW_FROM = ["any"]
        outside = Client(REMOTE_ADDR="203.0.113.7")
        assert outside.get("/metrics").status_code == 401
        authorized = outside.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert authorized.status_code == 200

    def test_an_empty_token_setting_opens_nothing(self, settings: Settings) -> None:
        settings.TRINITY_METRICS_TOKEN = ""
        assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401

    def test_it_is_not_under_the_api_and_never_cached(self, client: Client) -> None:
        response = client.get("/metrics")
        assert "no-cache" in response["Cache-Control"]
        assert client.post("/metrics").status_code == 405


class TestStateGauges:
    def test_each_subscriptions_windows_by_name_and_nothing_secret(self, client: Client) -> None:
        plan = SubscriptionFactory.create(name="plan-a")
        other = SubscriptionFactory.create(name="plan-b")
        snapshots_write(
            {
                plan.pk: reading(
                    five_hour=42.5,
                    seven_day=71.0,
                    five_hour_resets_in=timedelta(hours=2),
                    seven_day_resets_in=timedelta(days=3),
                    age=timedelta(minutes=4),
                ),
                # Its 5h window reset a minute ago: that figure describes spent quota
                # that no longer exists.
                other.pk: reading(
                    five_hour=99.0,
                    seven_day=10.0,
                    five_hour_resets_in=timedelta(minutes=-1),
                    seven_day_resets_in=timedelta(days=1),
                ),
            }
        )
        with time_machine.travel(T0, tick=False):
            response = client.get("/metrics")
        text = response.content.decode()
        got = parse(text)

        util = "trinity_subscription_utilization_percent"
        reset = "trinity_subscription_reset_seconds"
        assert value(got, util, subscription="plan-a", window="5h") == 42.5
        assert value(got, util, subscription="plan-a", window="7d") == 71.0
        assert value(got, reset, subscription="plan-a", window="5h") == 2 * 3600
        assert value(got, reset, subscription="plan-a", window="7d") == 3 * 86400
        assert value(got, "trinity_subscription_reading_age_seconds", subscription="plan-a") == 240
        assert (util, frozenset({("subscription", "plan-b"), ("window", "5h")})) not in got
        assert (reset, frozenset({("subscription", "plan-b"), ("window", "5h")})) not in got
        assert value(got, util, subscription="plan-b", window="7d") == 10.0
        for subscription in (plan, other):
            assert subscription.token is not None
            assert subscription.token.reveal() not in text
        # Labelled by name and window only: no id, no fingerprint.
        labels = {labelset for (name, labelset) in got if name.startswith("trinity_subscription_")}
        assert {k for labelset in labels for k, _ in labelset} == {"subscription", "window"}
        assert {v for labelset in labels for k, v in labelset if k == "subscription"} == {
            "plan-a",
            "plan-b",
        }

    def test_agent_servers_up_counts_the_agents_recorded_running(self, client: Client) -> None:
        AgentFactory.create(name="up-1", process_state=ProcessState.RUNNING)
        AgentFactory.create(name="up-2", process_state=ProcessState.RUNNING)
        AgentFactory.create(name="down", process_state=ProcessState.STOPPED)
        AgentFactory.create(name="broken", process_state=ProcessState.FAILED)

        assert value(scrape(client), "trinity_agent_servers_up") == 2

    @pytest.mark.parametrize(
        ("table", "lost", "kept"),
        [
            (
                "agents_agent",
                "trinity_agent_servers_up",
                "trinity_subscription_reading_age_seconds",
            ),
            (
                "subscriptions_subscription",
                "trinity_subscription_reading_age_seconds",
                "trinity_agent_servers_up",
            ),
        ],
    )
    def test_one_apps_unreadable_table_drops_its_gauges_only(
        self, client: Client, table: str, lost: str, kept: str
    ) -> None:
        # Each app registers its own collector (agents/metrics.py, subscriptions/
        # metrics.py); one that fails leaves the other's gauges and the counters
        # (trinity.metrics.StateCollector asks each apart).
        plan = SubscriptionFactory.create(name="plan-a")
        snapshots_write({plan.pk: reading(five_hour=42.5, age=timedelta(minutes=4))})
        AgentFactory.create(name="up-1", process_state=ProcessState.RUNNING)

        def refuse(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            if f'"{table}"' in sql:
                raise OperationalError("the table is unreadable")
            return execute(sql, params, many, context)

        with time_machine.travel(T0, tick=False), connection.execute_wrapper(refuse):
            got = scrape(client)

        assert not any(name == lost for name, _ in got)
        assert any(name == kept for name, _ in got)
        assert ("trinity_turn_overhead_seconds_count", frozenset()) in got


@pytest.mark.django_db(transaction=True)
def test_each_probe_counts_by_result_with_its_latency(
    simulator: SimulatorProcess, settings: Settings, client: Client
) -> None:
    sim: SimulatorControl = simulator.control
    sim.reset()
    sim.set_clock(T0)
    settings.TRINITY_ANTHROPIC_BASE_URL = simulator.base_url
    ok = plan_on(sim, seven_day=30)
    dead = plan_on(sim)
    assert dead.token is not None
    sim.revoke(dead.token.reveal())
    before = scrape(client)

    headroom_refresh(subscription=ok, now=T0)
    headroom_refresh(subscription=dead, now=T0)

    after = scrape(client)
    probes = "trinity_headroom_probes_total"
    for result, moved in (("ok", 1), ("invalid_token", 1), ("error", 0)):
        assert value(after, probes, result=result) - value(before, probes, result=result) == moved
    count = "trinity_headroom_probe_seconds_count"
    assert value(after, count) - value(before, count) == 2
    assert value(after, "trinity_headroom_probe_seconds_sum") > value(
        before, "trinity_headroom_probe_seconds_sum"
    )


def test_the_grafana_dashboard_charts_only_metrics_the_platform_exports() -> None:
    import json
    import re
    from pathlib import Path

    from prometheus_client import REGISTRY

    from trinity import metrics

    dashboard = json.loads(
        (Path(__file__).resolve().parents[2] / "deploy/grafana-dashboard.json").read_text()
    )
    families = [
        *(f for f in REGISTRY.collect() if f.name.startswith("trinity_")),
        *metrics.StateCollector().describe(),
    ]
    exported = {
        f"{family.name}{suffix}"
        for family in families
        for suffix in ("", "_total", "_bucket", "_sum", "_count")
    }
    charted = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\btrinity_[a-z0-9_]+", target["expr"])
    }
    assert charted, "the dashboard charts nothing"
    assert charted <= exported, charted - exported
