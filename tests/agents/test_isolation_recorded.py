"""What the platform records of the isolation an agent server reports: the server's own
word, except that an own user in a container of its own (the Docker runtime) is
``container``, not "no sandbox" (the panel warns about ``separate-user`` only)."""

from __future__ import annotations

import pytest

from agents.models import isolation_recorded
from agents.runtimes.docker import DockerRuntime
from agents.runtimes.local import LocalProcessRuntime


@pytest.mark.parametrize(
    ("reported", "contained", "recorded"),
    [
        ("sandbox", False, "sandbox"),
        ("sandbox", True, "sandbox"),  # a sandbox inside the container says more
        ("separate-user", False, "separate-user"),  # the host's network: not contained
        ("separate-user", True, "container"),
        ("same-user", False, "same-user"),
        ("same-user", True, "same-user"),  # the CLI could read its server's memory
        ("container", False, ""),  # no server reports it: the platform's word only
        (None, True, ""),
        ("root", False, ""),
    ],
)
def test_a_contained_separate_user_is_recorded_as_container(
    reported: object, contained: bool, recorded: str
) -> None:
    assert isolation_recorded(reported, contained=contained) == recorded


def test_only_the_docker_runtime_contains_each_agent() -> None:
    assert (DockerRuntime.contained, LocalProcessRuntime.contained) == (True, False)
