"""deploy/gunicorn.conf.py: uvicorn workers serve the ASGI application (an event
stream holds no thread; a sync turn holds a thread of its own, not a process), and no
timeout of the web server cuts a turn the settings allow.

The conf file is loaded the way gunicorn loads it (executed as a Python file) with a
chosen environment, so each case reads what a deployment with that environment gets.
"""

from __future__ import annotations

import importlib
import re
import runpy
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings

from execution.services import DEADLINE_SLACK

CONF = Path(__file__).resolve().parents[2] / "deploy" / "gunicorn.conf.py"


def _load(monkeypatch: pytest.MonkeyPatch, **environ: str) -> dict[str, Any]:
    for name in ("TRINITY_TURN_TIMEOUT_MAX_SECONDS", "WEB_CONCURRENCY", "WEB_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(CONF))


def _longest_turn(max_seconds: float) -> float:
    """The longest a sync turn can hold its thread: the max budget plus the slack the
    dispatch loop allows itself (the client's margin and finishing the row)."""
    return max_seconds + DEADLINE_SLACK.total_seconds()


def test_it_serves_the_asgi_application_on_uvicorn_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conf = _load(monkeypatch)
    assert conf["worker_class"] == "uvicorn_worker.UvicornWorker"
    assert conf["wsgi_app"] == "trinity.asgi:application"
    # The worker class and the application it names are both importable here.
    module, _, name = conf["worker_class"].rpartition(".")
    assert getattr(importlib.import_module(module), name)
    assert "threads" not in conf  # a gthread setting: the bound is WEB_THREADS, in trinity/asgi.py


def test_its_timeouts_outlast_the_longest_turn_the_settings_allow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Unset, the conf and trinity/settings.py agree on the same default maximum.
    conf = _load(monkeypatch)
    longest = _longest_turn(settings.TRINITY_TURN_TIMEOUT_MAX_SECONDS)
    assert conf["timeout"] > longest
    # A graceful restart (deploy, HUP) lets every in-flight turn finish.
    assert conf["graceful_timeout"] > longest


@pytest.mark.parametrize("max_seconds", [30, 780, 3600, 6 * 3600])
def test_its_timeouts_follow_the_turn_maximum_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, max_seconds: int
) -> None:
    conf = _load(monkeypatch, TRINITY_TURN_TIMEOUT_MAX_SECONDS=str(max_seconds))
    assert conf["timeout"] > _longest_turn(max_seconds)
    assert conf["graceful_timeout"] > _longest_turn(max_seconds)


@pytest.mark.parametrize("raw", ["soon", "29", str(6 * 3600 + 1)])
def test_a_bad_turn_maximum_stops_the_server_with_its_name(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    with pytest.raises(RuntimeError, match="TRINITY_TURN_TIMEOUT_MAX_SECONDS"):
        _load(monkeypatch, TRINITY_TURN_TIMEOUT_MAX_SECONDS=raw)


def test_the_backend_image_runs_gunicorn_with_this_conf() -> None:
    dockerfile = (CONF.parent / "Dockerfile.backend").read_text()
    assert "COPY deploy/gunicorn.conf.py" in dockerfile
    cmd = next(line for line in dockerfile.splitlines() if line.startswith("CMD"))
    assert "gunicorn" in cmd and "gunicorn.conf.py" in cmd
    assert "--timeout" not in cmd and "--workers" not in cmd  # one source: the conf


def test_compose_gives_the_web_server_its_graceful_timeout_to_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compose = yaml.safe_load((CONF.parent / "compose.yaml").read_text())
    grace = compose["services"]["web"]["stop_grace_period"]
    match = re.fullmatch(r"(\d+)([smh])", grace)
    assert match, grace
    seconds = int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]
    assert seconds >= _load(monkeypatch)["graceful_timeout"]
