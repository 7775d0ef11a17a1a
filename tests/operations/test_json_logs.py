"""LOG_FORMAT=json: one JSON object per line, carrying the execution id (and the agent
and subscription where they apply) across the web process and the agent server, with
redaction over every field.

The end-to-end case is a real gunicorn (deploy/gunicorn.conf.py) serving a real turn:
the web process starts the agent server itself (so the server inherits the format),
which runs the real Claude Code CLI against the simulator. Bounded in time; the web
process and the agent server are stopped at teardown.
"""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from knox.models import AuthToken

from simulator.control import SimulatorControl
from subscriptions import services as subscription_services
from tests.agents.factories import AgentFactory
from tests.operations.services import REPO, gunicorn, platform_env, shared_database_url
from tests.subscriptions.factories import plan_token
from trinity_contract.log_json import ContextFilter, JsonFormatter, log_context, log_context_update
from trinity_contract.redaction import (
    RedactingFilter,
    Redactor,
    platform_redactor,
    register_secret,
)

CANARY = "sk-ant-oat01-JSONLOGCANARY000000000000000000000000000000000007"


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line parsed; fails on the first line that is not one JSON object."""
    parsed = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            pytest.fail(f"line {number} is not JSON: {line[:200]!r}")
        assert isinstance(entry, dict), line
        parsed.append(entry)
    return parsed


def _handler(stream: io.StringIO) -> logging.Handler:
    """The handler trinity/settings.py builds for LOG_FORMAT=json."""
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactingFilter(platform_redactor))
    handler.setFormatter(JsonFormatter(platform_redactor))
    return handler


def test_every_field_is_redacted_and_the_context_is_scoped() -> None:
    stream = io.StringIO()
    log = logging.getLogger("tests.operations.jsonlog")
    log.addHandler(handler := _handler(stream))
    log.propagate = False
    register_secret(CANARY)
    try:
        with log_context(execution_id="exec-1", agent="bot", subscription="plan-a"):
            log.warning("sent %s", CANARY)
            log_context_update(subscription="plan-b")
            try:
                raise RuntimeError(f"upstream echoed {CANARY}")
            except RuntimeError:
                log.exception("failed")
            # A field that arrives on the record itself is redacted too.
            log.info("extra", extra={"agent": f"bot {CANARY}"})
        log.info("outside")
    finally:
        log.removeHandler(handler)
        log.propagate = True

    text = stream.getvalue()
    assert CANARY not in text
    first, second, third, outside = json_lines(text)
    assert first["message"] == "sent [redacted]"
    assert (first["execution_id"], first["agent"], first["subscription"]) == (
        "exec-1",
        "bot",
        "plan-a",
    )
    assert second["subscription"] == "plan-b" and "RuntimeError" in second["exc"]
    assert third["agent"] == "bot [redacted]"
    assert {"execution_id", "agent", "subscription"}.isdisjoint(outside)
    assert outside["level"] == "INFO" and outside["logger"] == "tests.operations.jsonlog"


def test_the_agent_servers_lines_carry_the_execution_id_redacted() -> None:
    redactor = Redactor()
    redactor.add(CANARY)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter(redactor))
    handler.setFormatter(JsonFormatter(redactor, agent="bot"))
    log = logging.getLogger("tests.operations.serverlog")
    log.addHandler(handler)
    log.propagate = False
    try:
        with log_context(execution_id="exec-9"):
            log.info("turn with %s", CANARY)
        log.info("idle")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    turn, idle = json_lines(stream.getvalue())
    assert CANARY not in stream.getvalue()
    assert (turn["execution_id"], turn["agent"]) == ("exec-9", "bot")
    assert "execution_id" not in idle and idle["agent"] == "bot"


def test_the_platform_and_the_agent_server_write_one_format() -> None:
    """One formatter (trinity_contract/log_json.py), two ways to feed it: the platform's
    record carries its context fields, the agent server's line takes the execution id
    from the open context and its agent from the formatter."""
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "tests.same", logging.ERROR, __file__, 1, "turn %s", ("x",), exc_info
    )
    record.stack_info = "Stack (most recent call last):\n  in the test"
    with log_context(execution_id="exec-1"):  # where the agent server's lines take it from
        server = json.loads(JsonFormatter(Redactor(), agent="bot").format(record))
    record.execution_id, record.agent = "exec-1", "bot"
    platform = json.loads(JsonFormatter(platform_redactor).format(record))
    assert (
        set(platform)
        == set(server)
        == {
            "ts",
            "level",
            "logger",
            "message",
            "pid",
            "execution_id",
            "agent",
            "exc",
            "stack",
        }
    )
    assert {k: v for k, v in platform.items() if k != "exc"} == {
        k: v for k, v in server.items() if k != "exc"
    }
    assert "RuntimeError: boom" in platform["exc"] and "RuntimeError: boom" in server["exc"]


def test_a_bad_log_format_stops_the_process_with_its_name(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=REPO,
        env=platform_env(tmp_path, LOG_FORMAT="xml"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "LOG_FORMAT='xml' is not 'plain' or 'json'" in result.stderr


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_real_turns_lines_parse_and_carry_its_execution_id_in_web_and_agent_server(
    control: SimulatorControl, owner: User, tmp_path: Path
) -> None:
    if not settings.REDIS_URL:
        pytest.fail("this test needs Redis: the web process shares the cache")
    token = plan_token()
    control.register(token, kind="oauth", label="plan-a")
    plan, _ = subscription_services.subscription_register(
        name="plan-a", provider="anthropic", plan_type="max-20x", token=token
    )
    agent = AgentFactory.create(name="bot", owner=owner)
    subscription_services.assignment_set(agent=agent, subscription_id=plan.pk)
    api_token = AuthToken.objects.create(user=owner)[1]
    env = platform_env(
        tmp_path,  # the control fixture's VAR_DIR: the agent's home is where it stops it
        DATABASE_URL=shared_database_url(),
        REDIS_URL=settings.REDIS_URL,
        SECRET_KEY=settings.SECRET_KEY,
        TRINITY_ENCRYPTION_KEYS=",".join(settings.TRINITY_ENCRYPTION_KEYS),
        TRINITY_ANTHROPIC_BASE_URL=settings.TRINITY_ANTHROPIC_BASE_URL,
        CELERY_TASK_ALWAYS_EAGER="true",
        LOG_FORMAT="json",
        LOG_LEVEL="INFO",
    )
    web_log = tmp_path / "web.log"
    with gunicorn(env, log_path=web_log) as url:
        # The agent is stopped: the web process starts its server for this turn.
        response = httpx.post(
            f"{url}/api/agents/bot/task",
            json={"message": "say hi"},
            headers={"Authorization": f"Token {api_token}"},
            timeout=240,
        )
        assert response.status_code == 200, response.text
        execution_id = response.json()["id"]

    web_lines = json_lines(web_log.read_text())
    turn_lines = [e for e in web_lines if e.get("execution_id") == execution_id]
    assert turn_lines, web_lines
    assert {e["agent"] for e in turn_lines} == {"bot"}
    served = [e for e in turn_lines if "served by" in e["message"]]
    assert served and served[0]["subscription"] == "plan-a"
    server_lines = json_lines((tmp_path / "agents" / "bot" / "server.log").read_text())
    server_turn = [e for e in server_lines if e.get("execution_id") == execution_id]
    assert len(server_turn) >= 2, server_lines  # the turn's start and its end
    assert {e["agent"] for e in server_turn} == {"bot"}
    for text in (web_log.read_text(), (tmp_path / "agents" / "bot" / "server.log").read_text()):
        assert token not in text
