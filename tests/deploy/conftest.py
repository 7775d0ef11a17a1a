"""The Docker engine fixture of the container tests (tests/docker/conftest.py), for the
deployment test."""

from __future__ import annotations

from tests.docker.conftest import engine  # noqa: F401 - re-exported: one engine client
