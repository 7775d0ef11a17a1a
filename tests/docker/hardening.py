"""What every agent container of the docker runtime is, whichever CLI it runs: read
from the engine (docker inspect) and from the kernel (the server's /proc/1/status)."""

from __future__ import annotations

from typing import Any

from agents.runtimes.docker import (
    CAPABILITIES,
    GUARD_CAPABILITIES,
    SECURITY_OPT,
    TMPFS,
    WORK_AREA,
)
from tests.proc_status import cap_mask, proc_status


def assert_hardened(engine: Any, handle: str) -> dict[str, Any]:
    """Assert the container's hardening; its inspect, for what a test checks beside."""
    attrs: dict[str, Any] = engine.api.inspect_container(handle)
    host = attrs["HostConfig"]
    assert host["SecurityOpt"] == [SECURITY_OPT]  # no seccomp=unconfined, no apparmor option
    assert host["CapDrop"] == ["ALL"]
    assert sorted(host["CapAdd"]) == sorted([*CAPABILITIES, *GUARD_CAPABILITIES])
    assert (host["ReadonlyRootfs"], host["Privileged"]) == (True, False)
    assert host["Binds"] in (None, [])
    assert host["Tmpfs"] == TMPFS
    [volume] = attrs["Mounts"]
    assert (volume["Type"], volume["Destination"], volume["RW"]) == ("volume", WORK_AREA, True)
    assert volume["Driver"] == "local" and not host["Mounts"][0].get("VolumeOptions")

    # The kernel's view of the agent server (PID 1, root): the engine's default seccomp
    # filter (mode 2), no-new-privileges, and exactly the capabilities it was given
    # but the egress guard's two, which it dropped once its rules were in place.
    code, output = engine.containers.get(handle).exec_run(["cat", "/proc/1/status"])
    assert code == 0, output
    status = proc_status(output.decode())
    assert (status["Seccomp"], status["NoNewPrivs"]) == ("2", "1"), status
    assert status["CapBnd"] == status["CapEff"] == cap_mask(CAPABILITIES), status
    return attrs
