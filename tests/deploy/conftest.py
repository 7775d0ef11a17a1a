"""The container tests' engine, agent image and agents' network
(tests/docker/conftest.py), for the deployment and proxy tests."""

from __future__ import annotations

from tests.docker.conftest import (  # noqa: F401 - re-exported: one of each per run
    agent_image,
    engine,
    gateway,
)
