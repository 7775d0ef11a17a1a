"""How this agent server contains its CLI, decided once at boot.

- `sandbox`: root, an agent user, and a host that runs bubblewrap's namespaces
  (`agent_server/sandbox.py`); the forwarder listens on a Unix socket bound into each
  sandbox, and the limits apply through a cgroup (`agent_server/cgroups.py`);
- `separate-user`: root and an agent user, but no sandbox here (bwrap missing or
  refused, e.g. inside a container's default seccomp profile, or
  `TRINITY_AGENT_SANDBOX=off`): the CLI runs as that user on the host's network,
  and every process of that user is killed once no turn runs;
- `same-user`: not root (the weak mode).

`missing` names what keeps this server from the full sandbox (or its limits), so the
log, /health and the platform can say it.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from agent_server.cgroups import cgroup_make
from agent_server.config import AgentConfig
from agent_server.forwarder import UnixListen
from agent_server.isolation import AgentUser, Isolation, IsolationError
from agent_server.sandbox import (
    Sandbox,
    SandboxUnavailable,
    sandbox_probe,
    sandbox_tools,
)

logger = logging.getLogger(__name__)

FORWARDER_SOCKET = "forwarder.sock"
SOCKET_DIR_PREFIX = "trinity-fwd-"


@dataclass
class Confinement:
    isolation: Isolation
    missing: list[str] = field(default_factory=list)
    # The CLI's own OS user (None in the weak mode).
    user: AgentUser | None = None
    sandbox: Sandbox | None = None
    # The directory of the forwarder's socket (root's, 0700), removed at close.
    socket_dir: Path | None = None

    def forwarder_listen(self) -> UnixListen | None:
        """Where the forwarder listens when sandboxed; None: loopback TCP."""
        if self.sandbox is None:
            return None
        return UnixListen(
            path=self.sandbox.forwarder_socket,
            uid=self.sandbox.user.uid,
            gid=self.sandbox.user.gid,
            cli_url=self.sandbox.relay_url,
        )

    def close(self) -> None:
        if self.sandbox is not None and self.sandbox.cgroup is not None:
            self.sandbox.cgroup.close()
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)


def confinement_make(config: AgentConfig, *, cli_binary: str | None) -> Confinement:
    """Decide and prepare this server's containment; raises IsolationError when
    `TRINITY_AGENT_SANDBOX=required` and the sandbox cannot be had."""
    user = config.agent_user
    if user is None:
        return Confinement(
            "same-user",
            ["root: the agent server is not root, so the CLI runs as the server's own user"],
        )
    if config.sandbox == "off":
        return Confinement(
            "separate-user", ["sandbox: turned off (TRINITY_AGENT_SANDBOX=off)"], user=user
        )
    try:
        tools = sandbox_tools()
        sandbox_probe(tools)
    except SandboxUnavailable as exc:
        if config.sandbox == "required":
            raise IsolationError(f"TRINITY_AGENT_SANDBOX=required, but {exc}") from None
        return Confinement("separate-user", [f"sandbox: {exc}"], user=user)
    cgroup, missing = cgroup_make(config.limits, name=user.name)
    # mkdtemp: a fresh 0700 directory of root's no one else can enter or pre-empt;
    # short, so the socket path fits a Unix socket address. Named after this server's
    # pid, so a later server can remove the ones a SIGKILLed server left.
    _sweep_socket_dirs()
    socket_dir = Path(tempfile.mkdtemp(prefix=f"{SOCKET_DIR_PREFIX}{os.getpid()}-"))
    readonly: tuple[Path, ...] = ()
    if cli_binary and Path(cli_binary).is_absolute() and Path(cli_binary).exists():
        readonly = (Path(cli_binary).parent,)
    sandbox = Sandbox(
        tools=tools,
        user=user,
        forwarder_socket=socket_dir / FORWARDER_SOCKET,
        readonly=readonly,
        cgroup=cgroup,
    )
    return Confinement("sandbox", missing, user=user, sandbox=sandbox, socket_dir=socket_dir)


def _sweep_socket_dirs() -> None:
    """Remove the socket directories of servers that are gone (this user's own only)."""
    for entry in Path(tempfile.gettempdir()).glob(f"{SOCKET_DIR_PREFIX}*-*"):
        pid = entry.name.removeprefix(SOCKET_DIR_PREFIX).split("-", 1)[0]
        try:
            info = entry.lstat()
        except OSError:
            continue
        if (
            pid.isdigit()
            and not Path(f"/proc/{pid}").exists()
            and stat.S_ISDIR(info.st_mode)
            and info.st_uid == os.geteuid()
        ):
            shutil.rmtree(entry, ignore_errors=True)
