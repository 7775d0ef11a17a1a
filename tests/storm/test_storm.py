"""The turn storm, small, in ``make test``: 40 concurrent turns across 5 agents (one
on the real Claude Code CLI) while 3 of 4 plans refuse, served by two gunicorn
processes and a real Celery worker on the test's Postgres and Redis, against the
simulator. bench/_storm.py is the harness; bench/storm.py runs it at 500 turns.

Every correctness figure has an exact target: every turn completes, every agent is
committed once to the serving plan and told once, no turn is lost or duplicated (what
was sent, the Execution rows and the simulator's request log agree), no notification
is duplicated, no answer is a 5xx, and nothing the storm started is left running or
in Redis. Timing is the benchmark's business, not this test's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from bench._storm import SERVING_PLAN, StormPlan, database_url_of, storm_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PLAN = StormPlan(
    turns=40,
    agents=5,
    cli_agents=1,
    async_every=5,
    web_processes=2,
    web_threads=8,
    worker_concurrency=2,
    max_seconds=120.0,
)


def test_a_storm_completes_every_turn_and_commits_each_agent_once(tmp_path: Path) -> None:
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.fail("the storm runs on Postgres and Redis: set DATABASE_URL and REDIS_URL")
    result = storm_run(
        PLAN,
        database_url=database_url_of(connection.settings_dict),
        redis_url=settings.REDIS_URL,
        workdir=tmp_path,
    )
    report = "\n".join(result.table())
    print(report)  # shown with -s, and on a failure

    assert result.completed == PLAN.turns, report
    assert sum(1 for s in result.sent if s.run_async and s.status == 202) == 8, report
    assert result.commits == {name: 1 for name in result.commits}, report
    assert len(result.commits) == PLAN.agents
    assert set(result.assigned.values()) == {SERVING_PLAN}, report
    assert result.switch_notices == {name: 1 for name in result.commits}, report
    assert result.lost == [], report
    assert result.duplicated == [], report
    assert result.upstream_unaccounted == 0, report
    assert result.attempts_unseen == 0, report
    assert result.duplicate_notifications == 0, report
    assert result.answers_5xx == 0, report
    assert result.mismatched_answers == 0, report
    assert result.processes_left == [], report
    assert result.redis_keys_left == 0, report
    assert result.problems() == [], report
