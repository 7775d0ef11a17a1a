"""The sandbox every turn's CLI runs in on the local runtime: bubblewrap around it.

A spawn runs, as root, `bwrap` (Debian's `bubblewrap`) with

- its own network namespace (only `lo`): the one thing it reaches is this agent
  server's forwarder, whose Unix socket (0600, owned by the agent user, in a 0700
  directory of root's) is bound in at `/run/trinity/forwarder.sock`; a relay inside
  (`socat`, started first, the CLI exec'd once it listens) serves it on
  `127.0.0.1:RELAY_PORT`, the base URL the CLI is given. No loopback service of the
  host, no other agent's forwarder, nothing on the network;
- its own PID namespace, `--die-with-parent` and `--new-session`: when the CLI exits
  (or is killed) the namespace's init exits and the kernel kills everything left in
  it, whatever sessions or double forks it made; the server dying kills it too;
- its own IPC and UTS namespaces;
- a filesystem of read-only binds: `/usr` (and the merged-usr links), the few files of
  `/etc` the CLIs and their tools need (`ETC_ENTRIES`: certificates, passwd/group,
  resolver and loader files; never the rest, which may hold secrets), the staged CLI
  and its cache; a fresh `/proc` and `/dev`, an empty private `/tmp`; writable only
  the agent's working directory and this spawn's HOME, at their own paths.

Inside, `setpriv` drops to the agent's own user (no supplementary groups, every
capability gone from all sets; bwrap already set no_new_privs) before anything of
the agent's runs. The spawned child joins the agent's cgroup first
(`agent_server/cgroups.py`), so the limits count every process of the sandbox.

`sandbox_probe` runs one empty sandbox at boot: a host without bwrap, socat or
setpriv, or where namespaces cannot be made (a container's default seccomp profile),
runs the CLI as its user without a sandbox and says what is missing.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from agent_server.cgroups import AgentCgroup
from agent_server.isolation import AGENT_UMASK, AgentUser

# Inside the sandbox: where the forwarder's socket is bound, and the relay's port
# (each sandbox has its own loopback, so one fixed port serves every spawn).
FORWARDER_INSIDE: Final = "/run/trinity/forwarder.sock"
RELAY_PORT: Final = 41873
RELAY_URL: Final = f"http://127.0.0.1:{RELAY_PORT}"
# The merged-usr links (or directories) of the root, bound as the host has them.
ROOT_LINKS: Final = ("bin", "sbin", "lib", "lib64", "lib32", "libx32")
# What of /etc a CLI and the usual tools read: TLS roots, users and groups (names
# only; never shadow), name lookup of localhost, the loader's cache, time zone,
# alternatives (`awk` and friends are links through it), git's and the terminal's
# system defaults, the distribution's name. Nothing else: the rest of /etc may hold
# secrets, and each bind is a mount on the spawn's path (interactive shells' rc files,
# the resolver's tuning and the like are left out: a sandbox has no network to tune).
ETC_ENTRIES: Final = (
    "alternatives",
    "ca-certificates",
    "gitconfig",
    "group",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "resolv.conf",
    "ssl",
    "terminfo",
    "timezone",
)
NAMESPACES: Final = (
    "--unshare-net",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--new-session",
)
PROBE_SECONDS: Final = 10.0
PRIVATE_TMP: Final = "/tmp"  # noqa: S108 - the sandbox's own tmpfs, not the host's /tmp
# The relay starts in the background; the CLI is exec'd once /proc/net/tcp (this
# namespace's) shows it listening. Shell builtins only: no process per check. The
# bound keeps a relay that cannot start from hanging the spawn: the CLI then fails
# to connect and says so.
_INIT: Final = """
{relay} TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,nodelay \
  UNIX-CONNECT:{socket} 2>/dev/null &
listening() {{
  while read -r _ a _ s _; do [ "$a $s" = "0100007F:{hex} 0A" ] && return 0; done \
    </proc/net/tcp
  return 1
}}
umask {umask:03o}
n=0
until listening || [ $n -ge 20000 ]; do n=$((n + 1)); done
exec "$@"
"""


class SandboxUnavailable(Exception):
    """The host cannot run the sandbox; the message names what is missing."""


@dataclass(frozen=True)
class SandboxTools:
    bwrap: str
    relay: str
    setpriv: str
    shell: str


def sandbox_tools() -> SandboxTools:
    """The programs the sandbox runs, found on PATH; raises SandboxUnavailable."""
    found = {name: shutil.which(name) for name in ("bwrap", "socat", "setpriv", "sh")}
    absent = [name for name, path in found.items() if path is None]
    if absent:
        hint = {"bwrap": "bubblewrap", "socat": "socat", "setpriv": "util-linux", "sh": "dash"}
        packages = ", ".join(f"{name} (Debian package {hint[name]})" for name in absent)
        raise SandboxUnavailable(f"not installed: {packages}")
    return SandboxTools(
        bwrap=str(found["bwrap"]),
        relay=str(found["socat"]),
        setpriv=str(found["setpriv"]),
        shell=str(found["sh"]),
    )


@dataclass(frozen=True)
class Sandbox:
    """How this agent server wraps each CLI spawn (one per server, many spawns)."""

    tools: SandboxTools
    user: AgentUser
    forwarder_socket: Path
    # Read-only binds at their own paths: the staged CLI's directory.
    readonly: tuple[Path, ...] = ()
    cgroup: AgentCgroup | None = field(default=None, compare=False)

    @property
    def relay_url(self) -> str:
        """The forwarder's base URL as the CLI inside sees it."""
        return RELAY_URL

    def argv(self, command: list[str], *, cwd: Path, home: Path) -> list[str]:
        """`command` wrapped: bwrap, the drop to the agent user, the relay, the CLI."""
        return [
            self.tools.bwrap,
            *NAMESPACES,
            *filesystem(readonly=self.readonly, writable=(cwd, home)),
            "--bind",
            str(self.forwarder_socket),
            FORWARDER_INSIDE,
            "--chdir",
            str(cwd),
            "--",
            *drop_to(self.tools.setpriv, self.user),
            self.tools.shell,
            "-c",
            init_script(self.tools.relay),
            "trinity-sandbox",
            *command,
        ]


def init_script(relay: str) -> str:
    """The sandbox's first process: the relay in the background, then the CLI."""
    return _INIT.format(
        relay=shlex.quote(relay),
        umask=AGENT_UMASK,
        port=RELAY_PORT,
        socket=FORWARDER_INSIDE,
        hex=f"{RELAY_PORT:04X}",
    )


def drop_to(setpriv: str, user: AgentUser) -> list[str]:
    return [
        setpriv,
        f"--reuid={user.uid}",
        f"--regid={user.gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]


def filesystem(*, readonly: tuple[Path, ...], writable: tuple[Path, ...]) -> list[str]:
    """The sandbox's mounts, in bwrap's order (a later mount lands on an earlier one).

    Every directory bwrap creates is given its mode (`--perms`): left to itself it
    copies modes that lock the agent user out of its own mount points.
    """
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ROOT_LINKS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", str(host.readlink()), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in ETC_ENTRIES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # The sandbox's own, empty /tmp (a tmpfs of its own, not the host's).
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", PRIVATE_TMP]
    args += ["--perms", "0755", "--tmpfs", "/run", "--perms", "0755", "--dir", "/run/trinity"]
    made = {Path("/"), Path(PRIVATE_TMP), Path("/run"), Path("/etc"), Path("/usr")}
    for path in (*readonly, *writable):
        for parent in reversed(path.parents):
            if parent not in made:
                made.add(parent)
                args += ["--perms", "0755", "--dir", str(parent)]
    for path in readonly:
        args += ["--ro-bind", str(path), str(path)]
    for path in writable:
        args += ["--bind", str(path), str(path)]
    return args


def sandbox_probe(tools: SandboxTools) -> None:
    """Run one empty sandbox; raises SandboxUnavailable with bwrap's own words when
    this host cannot make its namespaces (not root, a container's seccomp, a kernel
    without them)."""
    argv = [
        tools.bwrap,
        *NAMESPACES,
        *filesystem(readonly=(), writable=()),
        "--",
        tools.shell,
        "-c",
        "exit 0",
    ]
    try:
        done = subprocess.run(  # noqa: S603 - a fixed argv of absolute paths
            argv, capture_output=True, timeout=PROBE_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"bwrap could not run: {exc}") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = said[-1] if said else f"exit status {done.returncode}"
        raise SandboxUnavailable(f"bwrap cannot make the sandbox's namespaces here: {reason}")
