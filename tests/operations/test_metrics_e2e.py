"""/metrics after real turns, served by one gunicorn with two workers in
prometheus_client's multiprocess mode: the counters move by exactly what the turns
did, whichever worker ran each turn and whichever answers the scrape.

Real parts only: gunicorn (deploy/gunicorn.conf.py), the test's Postgres and Redis,
one agent server running the real Claude Code CLI, and the simulator. Bounded in
count and time, loopback only; gunicorn is stopped at teardown.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from knox.models import AuthToken
from prometheus_client.mmap_dict import MmapedDict

from agents import lifecycle
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from tests.agents.factories import AgentFactory
from tests.operations.scrape import parse, value
from tests.operations.services import gunicorn, platform_env, shared_database_url
from tests.subscriptions.factories import plan_token
from trinity import services as trinity_services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

TURN_SECONDS = 240.0
METRICS_TOKEN = "scrape-token-" + uuid.uuid4().hex


@pytest.fixture
def web(control: SimulatorControl, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """gunicorn, two sync workers (one request each at a time, so two concurrent
    turns land on both), sharing one multiprocess directory; its URL and that directory."""
    if not settings.REDIS_URL:
        pytest.fail("this test needs Redis: the web workers share the cache")
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = platform_env(
        tmp_path / "var",
        DATABASE_URL=shared_database_url(),
        REDIS_URL=settings.REDIS_URL,
        SECRET_KEY=settings.SECRET_KEY,
        TRINITY_ENCRYPTION_KEYS=",".join(settings.TRINITY_ENCRYPTION_KEYS),
        TRINITY_ANTHROPIC_BASE_URL=settings.TRINITY_ANTHROPIC_BASE_URL,
        CELERY_TASK_ALWAYS_EAGER="true",  # on-commit effects run in the request
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
        TRINITY_METRICS_TOKEN=METRICS_TOKEN,
    )
    with gunicorn(
        env, log_path=tmp_path / "web.log", workers=2, threads=1, worker_class="sync"
    ) as url:
        yield url, metrics_dir


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = httpx.get(
        f"{url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=30
    )
    assert response.status_code == 200, response.text
    return parse(response.text)


def pids_that_counted_turns(metrics_dir: Path) -> set[str]:
    """The processes whose own counter file holds a finished turn."""
    pids = set()
    for path in metrics_dir.glob("counter_*.db"):
        for entry in MmapedDict.read_all_values_from_file(str(path)):
            key, count = entry[0], entry[1]
            if '"trinity_turns_total"' in key and count > 0:
                pids.add(path.stem.removeprefix("counter_"))
    return pids


def test_the_counters_move_by_exactly_what_real_turns_did_across_two_workers(
    control: SimulatorControl, owner: User, web: tuple[str, Path]
) -> None:
    url, metrics_dir = web
    tokens = {}
    for name in ("plan-a", "plan-b"):
        tokens[name] = plan_token()
        control.register(tokens[name], kind="oauth", label=name)
        subscription_services.subscription_register(
            name=name, provider="anthropic", plan_type="max-20x", token=tokens[name]
        )
    a = subscription_services.Subscription.objects.get(name="plan-a")
    agent = AgentFactory.create(name="bot", owner=owner)
    subscription_services.assignment_set(agent=agent, subscription_id=a.pk)
    lifecycle.agent_start(agent=agent)  # both workers find it running
    api_token = AuthToken.objects.create(user=owner)[1]
    wall = 0.0

    def turn(message: str) -> dict[str, Any]:
        nonlocal wall
        started = time.monotonic()
        response = httpx.post(
            f"{url}/api/agents/bot/task",
            json={"message": message},
            headers={"Authorization": f"Token {api_token}"},
            timeout=TURN_SECONDS,
        )
        wall += time.monotonic() - started
        body: dict[str, Any] = response.json()
        body["http_status"] = response.status_code
        return body

    before = scrape(url)

    # Served on the plan, twice at once: each sync worker takes one.
    with ThreadPoolExecutor(max_workers=2) as pool:
        served = list(pool.map(turn, ["served 1", "served 2"]))
    assert [b["http_status"] for b in served] == [200, 200], served
    # Walked: plan-a refuses, plan-b serves and is committed.
    control.set_usage(tokens["plan-a"], "five_hour", percent=100)
    walked = turn("walked")
    assert walked["http_status"] == 200 and walked["subscription_switch"]["committed"], walked
    # Exhausted: plan-b refuses, then plan-a (last resort), and there is no key.
    control.set_usage(tokens["plan-b"], "five_hour", percent=100)
    exhausted = turn("exhausted")
    assert (exhausted["http_status"], exhausted["error_code"]) == (429, "billing"), exhausted
    # Routed before dispatch: both plans are known to refuse, so the first attempt
    # goes to the key, which serves and bills.
    key = "sk-ant-api03-" + uuid.uuid4().hex * 2
    control.register(key, kind="api_key", label="platform-key", credit_usd=50)
    trinity_services.platform_api_key_set(key=key)
    keyed = turn("key")
    assert keyed["http_status"] == 200 and keyed["served_by_kind"] == "api_key", keyed
    assert [a["why"] for a in keyed["attempts"]] == ["api_key"], keyed

    after = scrape(url)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    turns = "trinity_turns_total"
    assert moved(turns, outcome="succeeded", error_code="", credential="plan") == 3
    assert moved(turns, outcome="succeeded", error_code="", credential="key") == 1
    assert moved(turns, outcome="failed", error_code="billing", credential="plan") == 1
    assert (
        sum(v for (n, _), v in after.items() if n == turns)
        - sum(v for (n, _), v in before.items() if n == turns)
        == 5
    )
    # Rungs: 1 + 1 (served), 2 (walked), 2 (exhausted), 1 (routed to the key).
    assert moved("trinity_turn_rungs_count") == 5
    assert moved("trinity_turn_rungs_sum") == 7
    assert moved("trinity_turn_rungs_bucket", le="1.0") == 3
    assert moved("trinity_switches_total") == 1
    assert moved("trinity_walks_exhausted_total", error_code="billing") == 1
    assert moved("trinity_pre_dispatch_routes_total", to="key") == 1
    assert moved("trinity_pre_dispatch_routes_total", to="plan") == 0
    spent = float(Decimal(str(keyed["cost_usd"])))
    assert spent > 0
    assert moved("trinity_key_spend_usd_total") == pytest.approx(spent)
    plan_served = [*served, walked]
    for direction in ("input", "output"):
        field = f"{direction}_tokens"
        assert moved("trinity_tokens_total", credential="plan", direction=direction) == sum(
            b[field] for b in plan_served
        )
        assert moved("trinity_tokens_total", credential="key", direction=direction) == keyed[field]
    assert moved("trinity_tokens_total", credential="plan", direction="input") > 0
    # The backend's own time excludes the waits on the agent server, which are most of
    # a real turn's wall time.
    assert moved("trinity_turn_overhead_seconds_count") == 5
    assert 0 < moved("trinity_turn_overhead_seconds_sum") < wall / 2
    # The scrape-time gauges of the same scrape.
    assert value(after, "trinity_agent_servers_up") == 1
    # Both workers ran turns; the scrape, answered by one of them, summed both.
    assert len(pids_that_counted_turns(metrics_dir)) == 2
    for secret in (*tokens.values(), key):
        assert (
            secret
            not in httpx.get(
                f"{url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=30
            ).text
        )
