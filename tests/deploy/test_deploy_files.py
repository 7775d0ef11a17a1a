"""deploy/ stays honest: no Docker engine runs here, so these check what can be
checked without one — every COPY source exists, the agent image installs every
third-party module agent_server imports, and compose wires the processes DESIGN.md
names to the settings the code reads."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

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
    # The contract package both sides share is copied into the image, not installed.
    imports = _third_party_imports(ROOT / "agent_server") - {"trinity_contract"}
    assert imports <= installed, f"missing from agent-requirements.txt: {imports - installed}"
    assert not imports & {"django", "trinity", "agents", "subscriptions", "execution"}
    assert "COPY trinity_contract/ trinity_contract/" in (DEPLOY / "Dockerfile.agent").read_text()


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
    # Compose itself reads what it interpolates (``${NAME:?...}``, ``${NAME:-...}``)
    # and its own COMPOSE_PROJECT_NAME.
    compose_text = (DEPLOY / "compose.yaml").read_text()
    compose_reads = set(re.findall(r"\$\{([A-Z_]+):[?-]", compose_text)) | {"COMPOSE_PROJECT_NAME"}
    for line in (DEPLOY / "trinity.env.example").read_text().splitlines():
        line = line.lstrip("# ").strip()
        match = re.match(r"^([A-Z_]+)=", line)
        if match:
            name = match.group(1)
            assert f'"{name}"' in settings_source or name in compose_reads, name


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def _volumes(service: dict[str, Any]) -> list[str]:
    return [
        v if isinstance(v, str) else str(v.get("source", "")) for v in service.get("volumes", [])
    ]


def _networks(service: dict[str, Any]) -> set[str]:
    networks = service.get("networks", [])
    return set(networks) if isinstance(networks, list) else set(networks or {})


def test_no_service_but_the_socket_proxy_mounts_the_docker_socket() -> None:
    services = _compose()["services"]
    holders = {name for name, s in services.items() if any("docker.sock" in v for v in _volumes(s))}
    assert holders == {"docker-proxy"}
    # It mounts the socket read-only and runs the project's filtering proxy.
    [mount] = [v for v in _volumes(services["docker-proxy"]) if "docker.sock" in v]
    assert mount.endswith(":ro")
    assert services["docker-proxy"]["command"] == ["python", "-m", "docker_proxy"]
    assert services["docker-proxy"]["working_dir"] == "/app/deploy"


def test_web_and_worker_reach_the_engine_only_through_the_proxy() -> None:
    compose = _compose()
    services = compose["services"]
    for name in ("web", "worker"):
        env = services[name]["environment"]
        assert env["DOCKER_HOST"] == "tcp://docker-proxy:2375", name
        assert "engine" in _networks(services[name])
    assert _networks(services["docker-proxy"]) == {"engine"}
    assert compose["networks"]["engine"].get("internal") is True
    # The proxy admits the image and network the runtime is configured with.
    proxy_env = services["docker-proxy"]["environment"]
    backend_env = services["web"]["environment"]
    assert proxy_env["DOCKER_PROXY_IMAGE"] == backend_env["TRINITY_AGENT_IMAGE"]
    assert proxy_env["DOCKER_PROXY_NETWORK"] == backend_env["TRINITY_DOCKER_NETWORK"]


def test_agents_get_a_network_without_postgres_or_redis() -> None:
    compose = _compose()
    services = compose["services"]
    agents = services["web"]["environment"]["TRINITY_DOCKER_NETWORK"]
    [key] = [k for k, n in compose["networks"].items() if n.get("name", k) == agents]
    on_agents = {name for name, s in services.items() if key in _networks(s)}
    assert on_agents == {"web", "worker"}  # they call the agent servers
    for name in ("postgres", "redis"):
        assert _networks(services[name]) == {"backend"}, name
    assert compose["networks"]["backend"].get("internal") is True


def test_postgres_and_redis_passwords_come_from_the_env_file_with_no_default() -> None:
    text = (DEPLOY / "compose.yaml").read_text()
    services = _compose()["services"]
    required = re.compile(r"^\$\{(POSTGRES_PASSWORD|REDIS_PASSWORD):\?[^}]+\}$")
    assert required.match(services["postgres"]["environment"]["POSTGRES_PASSWORD"])
    assert "trinity:trinity@" not in text and "POSTGRES_PASSWORD: trinity" not in text
    for name in ("web", "worker", "beat", "migrate"):
        env = services[name]["environment"]
        assert "${POSTGRES_PASSWORD:?" in env["DATABASE_URL"], name
        assert env["REDIS_URL"].startswith("redis://:${REDIS_PASSWORD:?"), name
    redis = services["redis"]
    assert "requirepass" in " ".join(redis["command"])
    # Not in argv: `ps` on the host would show it to every local user.
    assert "REDIS_PASSWORD" not in " ".join(redis["command"]).replace("$$REDIS_PASSWORD", "")
    assert required.match(redis["environment"]["REDIS_PASSWORD"])


def test_metrics_need_the_token_from_the_env_file_with_no_default() -> None:
    """/metrics is open to every address on the backend network, so only the token
    holds it; a token generated inside one container would be one no scraper knows."""
    for name in ("web", "worker", "beat", "migrate"):
        env = _compose()["services"][name]["environment"]
        assert env["TRINITY_METRICS_ALLOW_FROM"] == "any", name
        assert re.match(r"^\$\{TRINITY_METRICS_TOKEN:\?[^}]+\}$", env["TRINITY_METRICS_TOKEN"])


def test_nothing_publishes_plain_http_beyond_loopback() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        for port in service.get("ports", []):
            spec = (
                port if isinstance(port, str) else f"{port.get('host_ip', '')}:{port['published']}"
            )
            assert spec.startswith("127.0.0.1:"), f"{name} publishes {spec} on every interface"
    assert services["web"]["environment"]["TRINITY_HTTPS"] == "true"


def test_the_backend_image_carries_the_socket_proxy() -> None:
    dockerfile = (DEPLOY / "Dockerfile.backend").read_text()
    assert "COPY deploy/docker_proxy/ deploy/docker_proxy/" in dockerfile
    assert "WORKDIR /app\n" in dockerfile  # compose runs the proxy from /app/deploy
