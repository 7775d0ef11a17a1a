"""deploy/ stays honest: no Docker engine runs here, so these check what can be
checked without one — every COPY source exists, the agent image installs every
third-party module agent_server imports, and compose wires the processes DESIGN.md
names to the settings the code reads."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


@pytest.mark.parametrize("dockerfile", ["Dockerfile.backend", "Dockerfile.agent"])
def test_every_copy_source_exists(dockerfile: str) -> None:
    for line in (DEPLOY / dockerfile).read_text().splitlines():
        match = re.match(r"^COPY\s+(?!--from)(.+)\s+\S+$", line.strip())
        if not match:
            continue
        for source in match.group(1).split():
            assert (ROOT / source).exists(), f"{dockerfile}: COPY {source} does not exist"


def _third_party_imports(package: Path) -> set[str]:
    names: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != package.name}


def test_the_agent_image_installs_what_agent_server_imports() -> None:
    requirements = (DEPLOY / "agent-requirements.txt").read_text()
    installed = {
        re.split(r"[<>=\[ ]", line)[0].lower()
        for line in requirements.splitlines()
        if line.strip() and not line.startswith("#")
    }
    imports = _third_party_imports(ROOT / "agent_server")
    assert imports <= installed, f"missing from agent-requirements.txt: {imports - installed}"
    assert not imports & {"django", "trinity", "agents", "subscriptions", "execution"}


def test_compose_runs_the_designed_processes_on_postgres_redis_and_docker_agents() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["REDIS_URL"].startswith("redis://")
        assert env["TRINITY_AGENT_BACKEND"] == "docker"
    assert "celery" in services["worker"]["command"] and "worker" in services["worker"]["command"]
    assert "beat" in services["beat"]["command"]


def test_the_env_example_names_only_settings_the_code_reads() -> None:
    settings_source = (ROOT / "trinity" / "settings.py").read_text()
    for line in (DEPLOY / "trinity.env.example").read_text().splitlines():
        line = line.lstrip("# ").strip()
        match = re.match(r"^([A-Z_]+)=", line)
        if match:
            assert f'"{match.group(1)}"' in settings_source, match.group(1)
