"""deploy/stack.yaml wires the swarm the way compose.yaml wires one host: who holds the
engine's socket, who reaches whom, where the secrets come from, how many of each
process run. tests/swarm/test_stack_deploy.py brings it up for real; these read it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
STACK = ROOT / "deploy" / "stack.yaml"
PLATFORM = ("migrate", "web", "worker", "beat", "gateway")
DEFAULT = re.compile(r"^\$\{[A-Z_]+:-(.*)\}$")


def _stack() -> dict[str, Any]:
    loaded = yaml.safe_load(STACK.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _default(value: object) -> str:
    """A value as deployed with no variable set (``${NAME:-default}`` is its default)."""
    match = DEFAULT.match(str(value))
    return match.group(1) if match else str(value)


def _volumes(service: dict[str, Any]) -> list[str]:
    return [str(v) for v in service.get("volumes", [])]


def test_only_the_proxy_holds_the_socket_read_only_and_only_on_a_manager() -> None:
    services = _stack()["services"]
    holders = {name for name, s in services.items() if any("docker.sock" in v for v in _volumes(s))}
    assert holders == {"docker-proxy"}
    proxy = services["docker-proxy"]
    [mount] = [v for v in _volumes(proxy) if "docker.sock" in v]
    assert mount.endswith(":/var/run/docker.sock:ro")
    assert proxy["deploy"]["placement"]["constraints"] == ["node.role == manager"]
    assert proxy["command"] == ["python", "-m", "docker_proxy"]
    assert proxy["read_only"] is True and proxy["cap_drop"] == ["ALL"]


def test_web_and_worker_start_agents_through_the_proxy_on_the_agents_overlay() -> None:
    stack = _stack()
    services, networks = stack["services"], stack["networks"]
    proxy_env = services["docker-proxy"]["environment"]
    for name in ("web", "worker"):
        env = services[name]["environment"]
        assert env["DOCKER_HOST"] == "tcp://docker-proxy:2375"
        assert env["TRINITY_AGENT_BACKEND"] == "swarm"
        assert env["TRINITY_SWARM_NETWORK_CREATE"] == "false"
        assert env["TRINITY_SWARM_ENDPOINT"] == "name"
        assert set(services[name]["networks"]) == {"backend", "engine", "trinity-agents"}
        # The proxy admits the image and the overlay the runtime uses.
        assert env["TRINITY_AGENT_IMAGE"] == proxy_env["DOCKER_PROXY_IMAGE"]
        assert env["TRINITY_SWARM_NETWORK"] == proxy_env["DOCKER_PROXY_NETWORK"]
    agents = networks["trinity-agents"]
    # A fixed name, the one the runtime and the proxy are given (not <stack>_...).
    assert agents["name"] == services["web"]["environment"]["TRINITY_SWARM_NETWORK"]
    assert agents["driver"] == "overlay" and "encrypted" in agents["driver_opts"]
    assert services["docker-proxy"]["networks"] == ["engine"]
    # Internal, and encrypted between hosts: the database's traffic, and the agents'
    # secrets on their way to the proxy.
    for name in ("backend", "engine"):
        assert networks[name] == {
            "driver": "overlay",
            "internal": True,
            "driver_opts": {"encrypted": ""},
        }


def test_postgres_and_redis_are_on_the_backend_only_and_stay_on_the_data_node() -> None:
    services = _stack()["services"]
    on_agents = {n for n, s in services.items() if "trinity-agents" in s.get("networks", [])}
    assert on_agents == {"web", "worker"}
    for name in ("postgres", "redis"):
        assert services[name]["networks"] == ["backend"]
        constraints = services[name]["deploy"]["placement"]["constraints"]
        assert constraints == ["node.labels.trinity.data == true"]


def test_every_secret_is_a_swarm_secret_read_from_a_file_the_settings_read() -> None:
    stack = _stack()
    settings_source = (ROOT / "trinity" / "settings.py").read_text()
    assert all(spec == {"external": True} for spec in stack["secrets"].values())
    for name in PLATFORM:
        service = stack["services"][name]
        env = service["environment"]
        files = {k.removesuffix("_FILE"): v for k, v in env.items() if k.endswith("_FILE")}
        assert set(files) == {
            "DATABASE_URL",
            "REDIS_URL",
            "SECRET_KEY",
            "TRINITY_ENCRYPTION_KEYS",
            "TRINITY_METRICS_TOKEN",
        }
        for variable, path in files.items():
            assert variable not in env, variable
            assert f'env_secret("{variable}")' in settings_source, variable
            assert path.removeprefix("/run/secrets/") in service["secrets"], path
    postgres = stack["services"]["postgres"]
    assert postgres["environment"]["POSTGRES_PASSWORD_FILE"] == (
        "/run/secrets/trinity_postgres_password"
    )
    redis = stack["services"]["redis"]
    # requirepass from the secret into a 0600 file: never in argv or the environment.
    assert "cat /run/secrets/trinity_redis_password" in " ".join(redis["command"])
    assert "environment" not in redis


def test_web_and_worker_scale_beat_is_one_and_everything_waits_for_migrations() -> None:
    services = _stack()["services"]
    assert _default(services["web"]["deploy"]["replicas"]) == "2"
    assert _default(services["worker"]["deploy"]["replicas"]) == "2"
    assert services["beat"]["deploy"]["replicas"] == 1
    assert services["beat"]["deploy"]["update_config"]["order"] == "stop-first"
    for name in ("web", "worker", "beat", "gateway"):
        assert services[name]["command"][:4] == ["python", "manage.py", "wait_ready", "--"]
    migrate = services["migrate"]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert migrate["deploy"]["restart_policy"]["condition"] == "on-failure"


def test_the_images_default_to_the_projects_and_the_registrys() -> None:
    services = _stack()["services"]
    for name in (*PLATFORM, "docker-proxy"):
        assert _default(services[name]["image"]) == "trinity-backend:latest", name
    assert _default(services["web"]["environment"]["TRINITY_AGENT_IMAGE"]) == (
        "trinity-agent:latest"
    )
    assert _default(services["postgres"]["image"]) == "postgres:15"
    assert _default(services["redis"]["image"]) == "redis:7"
