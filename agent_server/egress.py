"""The egress guard: the agent user reaches loopback and public addresses, nothing private.

Asked for with `TRINITY_AGENT_EGRESS_GUARD=1` (the docker and swarm runtimes set it,
and give the container NET_ADMIN and SETPCAP for it). On the agents' bridge network
every other agent's server has a private address, and on a swarm's overlay network
every service the platform runs (Postgres, Redis, the web app) too; the container is
the only wall between them and the agent's code.
At boot, as root, before anything is served, the server:

1. installs packet filter rules in the container's own network namespace, one
   `iptables-restore` per address family (all rules or none): packets of the agent
   user's processes (`-m owner --uid-owner`) pass on loopback (this server's
   forwarder, the engine's DNS at 127.0.0.11, the container's own addresses) and to
   public IPv4 addresses, and are refused (REJECT: the connect fails at once) for
   every private, shared, link-local, multicast or reserved IPv4 range
   (``REFUSED_IPV4``) and for all IPv6 but loopback. Before the refusals, the
   private IPv4 destinations the operator allows (`TRINITY_AGENT_EGRESS_ALLOW`,
   trinity_contract/egress.py: a git server, a package mirror) pass. Root's packets
   (the forwarder going to the provider) are not touched;
2. gives up for good the capabilities that took: NET_ADMIN and SETPCAP leave its
   bounding set (`prctl(PR_CAPBSET_DROP)`, which needs SETPCAP, hence the second
   capability) and its effective, permitted and inheritable sets (`capset`);
3. sets `no_new_privs` (`prctl(PR_SET_NO_NEW_PRIVS)`), which every process it
   starts inherits: no setuid binary or file capability gives anything back (a
   swarm service cannot ask the engine for `no-new-privileges`);
4. reads its own /proc status back to check all of it.

Capabilities and `no_new_privs` belong to a thread, not a process, so all of it runs
while the server is still one thread; every thread it starts later inherits them.

Fail closed: any step that fails raises EgressGuardError naming the step, and the
server exits before it listens. Not asked for, nothing here runs.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent_server.isolation import AgentUser
from trinity_contract.egress import EgressAllowance

CHAIN: Final = "TRINITY-AGENT-EGRESS"
# Every range that is not a public unicast address: private (RFC 1918), shared/CGNAT
# (RFC 6598), link-local (cloud metadata services live there), "this network",
# multicast and reserved (with the limited broadcast). Loopback passes before these.
REFUSED_IPV4: Final = (
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "169.254.0.0/16",
    "100.64.0.0/10",
    "0.0.0.0/8",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
# Linux capability numbers (include/uapi/linux/capability.h) and prctl options.
CAP_SETPCAP: Final = 8
CAP_NET_ADMIN: Final = 12
DROPPED_CAPABILITIES: Final = (CAP_NET_ADMIN, CAP_SETPCAP)
CAPABILITY_NAMES: Final = {CAP_SETPCAP: "CAP_SETPCAP", CAP_NET_ADMIN: "CAP_NET_ADMIN"}
PR_CAPBSET_DROP: Final = 24
PR_SET_NO_NEW_PRIVS: Final = 38
_CAPABILITY_VERSION_3: Final = 0x20080522
COMMAND_TIMEOUT: Final = 30.0


class EgressGuardError(Exception):
    """A step of the egress guard failed; the server must not serve."""

    def __init__(self, step: str, detail: str) -> None:
        super().__init__(f"egress guard: {step}: {detail}")
        self.step = step


@dataclass(frozen=True)
class EgressGuard:
    """What was installed: the agent user's uid, and whether IPv6 was guarded too
    (False only where the kernel has no IPv6 at all)."""

    uid: int
    ipv6: bool


def egress_guard_install(
    user: AgentUser | None, allowed: tuple[EgressAllowance, ...] = ()
) -> EgressGuard:
    """Install the guard for `user`, letting through the operator's `allowed` private
    destinations, and drop the privilege it took; see the module docstring. Raises
    EgressGuardError naming the step that failed."""
    if user is None or os.geteuid() != 0:
        raise EgressGuardError(
            "agent user", "the server is not root, so there is no agent user to guard"
        )
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise EgressGuardError(
            "single thread", f"{threads} threads: capabilities would be dropped in one only"
        )
    ipv4 = "\n".join(
        [
            *(allowance.rule(CHAIN) for allowance in allowed),
            *(f"-A {CHAIN} -d {cidr} -j REJECT" for cidr in REFUSED_IPV4),
        ]
    )
    _rules_install("iptables", user.uid, ipv4)
    # Docker's overlay networks hand out IPv6 only when asked; where the kernel has
    # IPv6 at all, the agent user gets none of it but loopback (fail closed).
    ipv6 = Path("/proc/net/if_inet6").exists()
    if ipv6:
        _rules_install("ip6tables", user.uid, f"-A {CHAIN} -j REJECT")
    privileges_drop(DROPPED_CAPABILITIES)
    return EgressGuard(uid=user.uid, ipv6=ipv6)


def ruleset(uid: int, refusals: str) -> str:
    """The `iptables-restore --noflush` input: the chain (flushed if it exists), its
    loopback pass and refusals, and the agent user's jump to it, first in OUTPUT."""
    return (
        "*filter\n"
        f":{CHAIN} - [0:0]\n"
        f"-A {CHAIN} -o lo -j RETURN\n"
        f"{refusals}\n"
        f"-I OUTPUT 1 -m owner --uid-owner {uid} -j {CHAIN}\n"
        "COMMIT\n"
    )


def _rules_install(command: str, uid: int, refusals: str) -> None:
    """Apply the ruleset with `<command>-restore`, then check the jump is in place."""
    step = f"{command} rules"
    binary, restore = shutil.which(command), shutil.which(f"{command}-restore")
    if binary is None or restore is None:
        raise EgressGuardError(step, f"{command} and {command}-restore are not installed")
    done = _run([restore, "--noflush"], ruleset(uid, refusals))
    if done.returncode != 0:
        raise EgressGuardError(step, f"{command}-restore refused them: {_last_line(done)}")
    jump = ["-C", "OUTPUT", "-m", "owner", "--uid-owner", str(uid), "-j", CHAIN]
    done = _run([binary, *jump], "")
    if done.returncode != 0:
        raise EgressGuardError(step, f"the agent user's jump is not in place: {_last_line(done)}")


def _run(argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(  # noqa: S603 - a fixed command line of absolute paths
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            env={"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")},
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = (done.stderr or done.stdout or "").strip().splitlines()
    return f"exit {done.returncode}: {lines[-1] if lines else 'no output'}"


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def privileges_drop(capabilities: tuple[int, ...]) -> None:
    """Drop `capabilities` from this thread's bounding, effective, permitted and
    inheritable sets, set no_new_privs, and check both in /proc. The bounding set
    first: that needs CAP_SETPCAP still effective. Raises EgressGuardError."""
    libc = ctypes.CDLL(None, use_errno=True)
    # All five arguments: PR_SET_NO_NEW_PRIVS refuses non-zero unused ones.
    libc.prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    libc.prctl.restype = ctypes.c_int
    for cap in capabilities:
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise EgressGuardError(
                "bounding set",
                f"dropping {CAPABILITY_NAMES.get(cap, cap)} needs CAP_SETPCAP: {_errno_text()}",
            )
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise EgressGuardError("capabilities", f"capget: {_errno_text()}")
    for cap in capabilities:
        word, keep = cap // 32, ~(1 << (cap % 32)) & 0xFFFFFFFF
        data[word].effective &= keep
        data[word].permitted &= keep
        data[word].inheritable &= keep
    if libc.capset(ctypes.byref(header), data) != 0:
        raise EgressGuardError("capabilities", f"capset: {_errno_text()}")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise EgressGuardError("no_new_privs", _errno_text())
    _check_dropped(capabilities)


def _errno_text() -> str:
    return os.strerror(ctypes.get_errno())


def _check_dropped(capabilities: tuple[int, ...]) -> None:
    """Read the kernel's word back: none of `capabilities` in any set, no_new_privs."""
    status = dict(
        line.split(":", 1)
        for line in Path("/proc/thread-self/status").read_text().splitlines()
        if ":" in line
    )
    mask = sum(1 << cap for cap in capabilities)
    for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        if int(status[field].strip(), 16) & mask:
            raise EgressGuardError("check", f"{field} still holds a dropped capability")
    if status["NoNewPrivs"].strip() != "1":
        raise EgressGuardError("check", "NoNewPrivs is not set")
