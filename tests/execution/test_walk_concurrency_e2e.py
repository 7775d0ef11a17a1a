"""Twenty concurrent turns on one agent during a 429 storm, served by two separate web
processes (gunicorn) on the test's Postgres: the subscription that served is committed
exactly once and the operator is told once, and every turn completes.

Real parts only: two gunicorn processes, the test database, Redis, one agent server
running the real Claude Code CLI, and the simulator. Bounded in count and time,
loopback only; both web processes are killed at teardown.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from knox.models import AuthToken

from agents import lifecycle
from execution.models import Execution
from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from tests.agents.factories import AgentFactory
from tests.operations.services import gunicorn, platform_env, shared_database_url
from tests.subscriptions.factories import plan_token
from trinity.models import Notification

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

TURNS = 20
TURN_SECONDS = 240.0


@pytest.fixture
def web_processes(control: SimulatorControl, tmp_path: Path) -> Iterator[list[str]]:
    """Two gunicorn processes on the test database; their base URLs."""
    if not settings.REDIS_URL:
        pytest.fail("this test needs Redis: the commit's notification dedup is shared")
    env = platform_env(
        tmp_path,
        DATABASE_URL=shared_database_url(),
        REDIS_URL=settings.REDIS_URL,
        SECRET_KEY=settings.SECRET_KEY,
        TRINITY_ENCRYPTION_KEYS=",".join(settings.TRINITY_ENCRYPTION_KEYS),
        TRINITY_ANTHROPIC_BASE_URL=settings.TRINITY_ANTHROPIC_BASE_URL,
        # all twenty turns run on one agent at once: above the default concurrency cap
        TRINITY_MAX_CONCURRENT_TURNS_PER_AGENT=str(TURNS),
        # on-commit effects (the winner's hot-reload) run in the request, no worker here
        CELERY_TASK_ALWAYS_EAGER="true",
    )
    with ExitStack() as stack:
        yield [
            stack.enter_context(gunicorn(env, log_path=tmp_path / f"web-{i}.log", threads=TURNS))
            for i in range(2)
        ]


def test_twenty_concurrent_turns_commit_once_across_two_web_processes(
    control: SimulatorControl, owner: User, web_processes: list[str]
) -> None:
    tokens = {}
    for name in ("plan-a", "plan-b", "plan-c"):
        tokens[name] = plan_token()
        control.register(tokens[name], kind="oauth", label=name)
        subscription_services.subscription_register(
            name=name, provider="anthropic", plan_type="max-20x", token=tokens[name]
        )
    a = subscription_services.Subscription.objects.get(name="plan-a")
    agent = AgentFactory.create(name="bot", owner=owner)
    subscription_services.assignment_set(agent=agent, subscription_id=a.pk)
    lifecycle.agent_start(agent=agent)  # both web processes find it running
    control.set_usage(tokens["plan-a"], "five_hour", percent=100)  # the storm
    api_token = AuthToken.objects.create(user=owner)[1]

    def turn(index: int) -> int:
        url = web_processes[index % 2]
        response = httpx.post(
            f"{url}/api/agents/bot/task",
            json={"message": f"turn {index}"},
            headers={"Authorization": f"Token {api_token}"},
            timeout=TURN_SECONDS,
        )
        return response.status_code

    with ThreadPoolExecutor(max_workers=TURNS) as pool:
        statuses = list(pool.map(turn, range(TURNS)))

    assert statuses == [200] * TURNS
    executions = Execution.objects.filter(agent_name="bot")
    assert executions.count() == TURNS
    assert all(e.status == "succeeded" for e in executions)
    assert {e.served_by_subscription.name for e in executions if e.served_by_subscription} <= {
        "plan-b",
        "plan-c",
    }
    committed = [e for e in executions if (e.subscription_switch or {}).get("committed")]
    assert len(committed) == 1
    assert Notification.objects.filter(kind="subscription_switched").count() == 1
    agent.refresh_from_db()
    assert agent.subscription_id == committed[0].served_by_subscription_id
