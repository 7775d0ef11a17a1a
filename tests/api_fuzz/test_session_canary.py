"""The session canary (tests/session_canary.py) sees a leak wherever it lands."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tests import session_canary
from tests.subscriptions.factories import plan_token


@pytest.fixture
def leaks() -> Iterator[list[session_canary.Hit]]:
    """The hits this test makes on purpose, taken back so the run stays green."""
    before = len(session_canary.HITS)
    caught: list[session_canary.Hit] = []
    yield caught
    caught.extend(session_canary.HITS[before:])
    del session_canary.HITS[before:]


def test_factory_tokens_carry_the_runs_marker() -> None:
    assert session_canary.MARKER in plan_token()


def test_a_rendered_log_line_is_scanned_after_redaction(leaks: list[object]) -> None:
    # A whole token is masked by the redactor's patterns before the scan sees it...
    logging.getLogger("tests.canary").warning("careless: %s", plan_token())
    assert not [h for h in session_canary.HITS if "tests.canary" in h.where]
    # ...a piece of one that no pattern knows is not, and is a hit.
    logging.getLogger("tests.canary").warning("careless: %s", session_canary.MARKER)
    hits = [h for h in session_canary.HITS if "log line (tests.canary)" in h.where]
    assert hits and session_canary.MARKER not in hits[0].excerpt


@pytest.mark.django_db
def test_a_token_in_a_response_or_a_file_is_a_hit(
    leaks: list[object], anon_client: APIClient, tmp_path: Path
) -> None:
    token = plan_token()
    anon_client.get(f"/api/{token}")  # the 404 does not echo the path...
    assert not session_canary.HITS[-1:] or "response" not in session_canary.HITS[-1].where
    session_canary.scan(f'{{"token": "{token}"}}'.encode(), "response GET /api/x")
    planted = tmp_path / "agent.log"
    planted.write_text(f"spawned with {token}\n")
    session_canary._scan_files(tmp_path)
    planted.unlink()  # or the end-of-run scan finds it again
    wheres = [h.where for h in session_canary.HITS]
    assert any(w.endswith("response GET /api/x") for w in wheres)
    assert any("agent.log" in w for w in wheres)


@pytest.mark.django_db
def test_a_plaintext_token_in_a_stored_row_is_a_hit(leaks: list[object]) -> None:
    from trinity import clock
    from trinity.models import Notification

    # Written around notification_send, which redacts: the scan must see the row itself.
    Notification.objects.create(
        kind="switch", title="leak", body=plan_token(), created_at=clock.now()
    )
    session_canary._scan_rows()
    assert any("Notification row" in h.where for h in session_canary.HITS)


def test_a_hits_excerpt_masks_the_whole_token_not_only_the_marker(leaks: list[object]) -> None:
    token = plan_token()
    session_canary.scan(f"spawned with {token} today", "file x.log")
    excerpt = session_canary.HITS[-1].excerpt
    assert excerpt == "spawned with sk-ant-oat01-<CANARY> today"
    assert token.removeprefix("sk-ant-oat01-" + session_canary.MARKER) not in excerpt


def test_a_token_anywhere_in_an_agents_home_is_a_hit_at_the_end(
    leaks: list[object], tmp_path: Path, settings: object
) -> None:
    settings.VAR_DIR = tmp_path  # type: ignore[attr-defined]
    token_file = tmp_path / "agents" / "bot" / ".trinity" / "oauth_token"
    token_file.parent.mkdir(parents=True)
    token_file.write_text(plan_token())  # no log suffix: the old end-of-run scan skipped it
    session_canary._remember_agent_dirs()
    assert tmp_path / "agents" in session_canary.AGENT_DIRS
    session_canary._scan_files(tmp_path / "agents", every_file=True)
    token_file.unlink()  # or the end-of-run scan finds it again
    assert any(h.where.endswith(f"file {token_file}") for h in session_canary.HITS)
