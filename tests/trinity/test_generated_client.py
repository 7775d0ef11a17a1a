"""The schema is a contract a third-party generator can use: a client generated from
``/api/schema/`` by openapi-python-client runs a turn, pages through executions and
reads the routing explainer against the live server, into its own typed models.

Real processes throughout: the live Django server, the agent server, the Claude Code
CLI and the simulator. The generator is pinned in pyproject.toml's dev extras.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from simulator.control import SimulatorControl
from tests.execution.support import agent_on, messages_sent, register_plan
from trinity import services as trinity_services

GENERATOR = Path(sys.executable).parent / "openapi-python-client"
# The audit export's JSON lines read as text (the generator knows no application/x-ndjson).
CONFIG = (
    "package_name_override: trinity_client\npost_hooks: []\n"
    "content_type_overrides:\n  application/x-ndjson: text/plain\n"
)


@pytest.fixture
def generated(tmp_path: Path, admin_client_api: APIClient) -> Iterator[ModuleType]:
    """The generated package, importable as ``trinity_client`` for this test."""
    schema = admin_client_api.get("/api/schema/?format=json")
    assert schema.status_code == 200
    (tmp_path / "schema.json").write_text(json.dumps(schema.json()))
    (tmp_path / "config.yaml").write_text(CONFIG)
    ran = subprocess.run(
        [str(GENERATOR), "generate", "--path", "schema.json", "--config", "config.yaml"]
        + ["--meta", "none", "--output-path", "trinity_client"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Any warning means part of the schema produced no client code.
    assert ran.returncode == 0 and "Warning" not in ran.stdout + ran.stderr, ran.stdout + ran.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("trinity_client")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == "trinity_client"]:
            del sys.modules[name]


def _part(package: ModuleType, name: str) -> Any:
    return importlib.import_module(f"{package.__name__}.{name}")


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_generated_client_runs_a_turn_pages_executions_and_reads_the_explainer(
    generated: ModuleType, live_server: Any, control: SimulatorControl, owner: User
) -> None:
    plan, _ = register_plan(control, "plan-a")
    agent_on(owner, plan)
    key = trinity_services.api_token_issue(username=owner.username).key
    client = generated.AuthenticatedClient(base_url=live_server.url, token=key, prefix="Token")
    task = _part(generated, "api.agents.agents_task_create")
    listing = _part(generated, "api.executions.executions_list")
    routing = _part(generated, "api.agents.agents_routing_retrieve")
    models = _part(generated, "models")

    turns = [
        task.sync("bot", client=client, body=models.AgentTaskInput(message=f"hi {i}"))
        for i in range(3)
    ]
    assert all(isinstance(t, models.ExecutionOutput) for t in turns), turns
    assert {t.status for t in turns} == {"succeeded"}

    seen: list[str] = []
    page = listing.sync(client=client, agent="bot", limit=2)
    while True:
        assert isinstance(page, models.PaginatedExecutionOutputList), page
        seen += [str(x.id) for x in page.results]
        if not page.next_:
            break
        cursor = parse_qs(urlsplit(page.next_).query)["cursor"][0]
        page = listing.sync(client=client, agent="bot", limit=2, cursor=cursor)
    assert seen == [str(t.id) for t in reversed(turns)]

    explained = routing.sync("bot", client=client)
    assert isinstance(explained, models.RoutingOutput), explained
    assert explained.agent == "bot"
    assert messages_sent(control) == [("plan-a", 200)] * 3
