"""A Docker Swarm of several nodes on this one machine, for the swarm tests.

    python deploy/swarm.py up [NODES]   # 3 by default: one manager, the rest workers
    python deploy/swarm.py down         # removes everything ``up`` made, even half-made
    python deploy/swarm.py kill NODE    # a node's loss; ``revive NODE`` brings it back

Each node is its own ``dockerd`` in a network namespace of its own
(``nsenter --net``: ``ip netns exec`` remounts /sys, which dockerd then refuses), with
its own data root, exec root, socket and PID file under
``.docker-swarm/swarm<id>/<node>/``.
The namespaces hang off one host bridge by veth pairs, on a private /24 the host also
has an address on: nodes reach each other (the swarm's control and VXLAN traffic) and
the host (the tests' provider simulator), nothing else. Inside its namespace an engine
keeps its own iptables rules (the overlay's NAT, published ports, encryption marks),
which touch none of the host's. One host rule is needed: the host engine sets the
FORWARD policy to drop and bridged frames pass through it (br_netfilter), so
``FORWARD_RULE`` accepts what goes from this bridge to itself; ``down`` deletes it.

Every container of a node is placed under the cgroup parent ``trinity-swarm-<node>``,
so ``kill`` (a node's loss: its engine, containerd and every container, SIGKILL) and
``down`` find them all. What ``up`` makes is recorded in its ``state.json``
before it is made, so ``down`` after a failed ``up`` removes the half too.

``up`` prints one JSON object: the nodes (name, role, address, socket) and the host's
address on the bridge. Standard library only, like deploy/engine.py; root only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "deploy"))

from engine import EngineError, engine_version  # noqa: E402 - the sibling script

# Which of several swarms on one machine (0-9; one per checkout running the tests at
# once): it names the bridge, the namespaces and veths, the state's directory, and
# picks the link's subnet.
SWARM_ID = int(os.environ.get("TRINITY_SWARM_ID", "0") or 0) % 10
STATE = ROOT / ".docker-swarm" / f"swarm{SWARM_ID}"
RECORD = STATE / "state.json"
BRIDGE = f"trsw{SWARM_ID}"
# The nodes' link, and the pool the swarm takes its overlay subnets from: private
# ranges no engine default uses (those are 172.17-31/16 and 192.168/16), apart.
SUBNET = f"10.213.{77 + SWARM_ID}"
HOST_ADDRESS = f"{SUBNET}.1"
ADDRESS_POOL = "10.214.0.0/16"
FORWARD_RULE = ("FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT")
START_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0


def _run(*command: str, check: bool = True, netns: str | None = None) -> str:
    if netns is not None:
        command = ("nsenter", f"--net=/var/run/netns/{netns}", *command)
    result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    if check and result.returncode != 0:
        raise EngineError(f"{' '.join(command)}: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def node_names(count: int) -> list[str]:
    return [f"{BRIDGE}-n{i}" for i in range(1, count + 1)]


def node_dir(node: str) -> Path:
    return STATE / node


def node_socket(node: str) -> str:
    return f"unix://{node_dir(node) / 'docker.sock'}"


def node_address(index: int) -> str:
    return f"{SUBNET}.{10 + index}"


def _record(nodes: list[str]) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps({"nodes": nodes}))


def _recorded() -> list[str]:
    try:
        return list(json.loads(RECORD.read_text())["nodes"])
    except (FileNotFoundError, ValueError, KeyError):
        return []


def _link(count: int) -> None:
    """The host bridge and one namespace per node on it, by a veth pair each."""
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "addr", "add", f"{HOST_ADDRESS}/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    if not _has_forward_rule():
        _run("iptables", "-I", *FORWARD_RULE)
    for index, node in enumerate(node_names(count), start=1):
        host_end, node_end = f"{node}-h", f"{node}-c"
        _run("ip", "netns", "add", node)
        _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", node_end)
        _run("ip", "link", "set", node_end, "netns", node)
        _run("ip", "link", "set", host_end, "master", BRIDGE, "up")
        _run("ip", "addr", "add", f"{node_address(index)}/24", "dev", node_end, netns=node)
        _run("ip", "link", "set", node_end, "up", netns=node)
        _run("ip", "link", "set", "lo", "up", netns=node)
        _run("ip", "route", "add", "default", "via", HOST_ADDRESS, netns=node)


def _has_forward_rule() -> bool:
    command = ("iptables", "-C", *FORWARD_RULE)
    return subprocess.run(command, capture_output=True, check=False).returncode == 0  # noqa: S603


def _dockerd(node: str) -> list[str]:
    base = node_dir(node)
    return [
        "nsenter",
        f"--net=/var/run/netns/{node}",
        "dockerd",
        f"--host={node_socket(node)}",
        f"--data-root={base / 'data'}",
        f"--exec-root={base / 'exec'}",
        f"--pidfile={base / 'dockerd.pid'}",
        f"--cgroup-parent=trinity-swarm-{node}",
        "--bridge=none",
    ]


def _start_engine(node: str) -> None:
    base = node_dir(node)
    base.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (base / "docker.sock").unlink()
    # No registry here: a node runs the image it holds instead of trying a pull first.
    env = {**os.environ, "DOCKER_SERVICE_PREFER_OFFLINE_IMAGE": "1"}
    with (base / "dockerd.log").open("ab") as log:
        subprocess.Popen(  # noqa: S603 - a fixed command line
            _dockerd(node), stdout=log, stderr=log, env=env, start_new_session=True
        )


def _wait_engine(node: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if engine_version(node_socket(node)) is not None:
            return
        time.sleep(0.5)
    tail = (node_dir(node) / "dockerd.log").read_text(errors="replace").splitlines()[-3:]
    raise EngineError(f"the engine of {node} did not come up: {' / '.join(tail)}")


def _docker(node: str, *args: str) -> str:
    return _run("docker", "-H", node_socket(node), *args).strip()


def _form(count: int) -> None:
    manager, *workers = node_names(count)
    address = node_address(1)
    _docker(
        manager,
        "swarm",
        "init",
        f"--advertise-addr={address}",
        f"--listen-addr={address}:2377",
        f"--default-addr-pool={ADDRESS_POOL}",
        "--default-addr-pool-mask-length=24",
        # A lost node is known for lost within seconds (the default period is 5 s).
        "--dispatcher-heartbeat=2s",
    )
    token = _docker(manager, "swarm", "join-token", "-q", "worker")
    for index, node in enumerate(workers, start=2):
        _docker(
            node,
            "swarm",
            "join",
            f"--token={token}",
            f"--advertise-addr={node_address(index)}",
            f"--listen-addr={node_address(index)}:2377",
            f"{address}:2377",
        )


def describe(count: int) -> dict[str, object]:
    return {
        "host_address": HOST_ADDRESS,
        "nodes": [
            {
                "name": node,
                "role": "manager" if index == 1 else "worker",
                "address": node_address(index),
                "socket": node_socket(node),
            }
            for index, node in enumerate(node_names(count), start=1)
        ],
    }


def swarm_up(count: int) -> dict[str, object]:
    """Make the nodes, start their engines, form the swarm; what ``describe`` says."""
    if os.geteuid() != 0:
        raise EngineError("a swarm of namespaced engines needs root")
    if _recorded():
        swarm_down()
    _record(node_names(count))
    _link(count)
    for node in node_names(count):
        _start_engine(node)
    for node in node_names(count):
        _wait_engine(node)
    _form(count)
    return describe(count)


def _pids_in(node: str) -> list[int]:
    """Every process of the node: its namespace's (engine, containerd, shims) and its
    containers' (the node's cgroup parent)."""
    pids: set[int] = set()
    listed = _run("ip", "netns", "pids", node, check=False)
    pids.update(int(p) for p in listed.split() if p.isdigit())
    for hierarchy in ("pids", "memory", "cpu", "systemd"):
        parent = Path("/sys/fs/cgroup") / hierarchy / f"trinity-swarm-{node}"
        for procs in parent.glob("**/cgroup.procs"):
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in procs.read_text().split())
    return sorted(pids)


def kill_node(node: str) -> None:
    """The node's loss: its link cut, then every process of it killed at once; returns
    once none is left (a killed process lingers until its parent reaps it)."""
    _run("ip", "link", "set", f"{node}-h", "down", check=False)
    deadline = time.monotonic() + STOP_TIMEOUT
    while (pids := _pids_in(node)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def revive_node(node: str) -> None:
    """A lost node back: its link up and its engine started on its old state, so it
    rejoins the swarm as the node it was (its containers are gone)."""
    _run("ip", "link", "set", f"{node}-h", "up")
    _start_engine(node)
    _wait_engine(node)


def _stop_engine(node: str) -> None:
    with contextlib.suppress(EngineError):
        _docker(node, "swarm", "leave", "--force")
    pidfile = node_dir(node) / "dockerd.pid"
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline and any(_is_engine(pid) for pid in _pids_in(node)):
        time.sleep(0.3)
    kill_node(node)


def _is_engine(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "dockerd"
    except OSError:
        return False


def _unmount_under(path: Path) -> None:
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    inside = [line.split()[1] for line in mounts if len(line.split()) > 1]
    for mountpoint in sorted(
        (m for m in inside if m.startswith(f"{path}/")), key=len, reverse=True
    ):
        subprocess.run(["umount", "-l", mountpoint], capture_output=True, check=False)  # noqa: S603,S607


def swarm_down() -> str:
    """Remove whatever ``up`` made (recorded), in reverse: engines, containers,
    veths, namespaces, the bridge, cgroups, mounts, then the directories."""
    nodes = _recorded()
    for node in nodes:
        _stop_engine(node)
    for node in nodes:
        _run("ip", "link", "del", f"{node}-h", check=False)
        _run("ip", "netns", "del", node, check=False)
        for hierarchy in Path("/sys/fs/cgroup").iterdir():
            parent = hierarchy / f"trinity-swarm-{node}"
            for group in sorted(parent.glob("**/"), key=lambda p: len(str(p)), reverse=True):
                with contextlib.suppress(OSError):
                    group.rmdir()
    while _has_forward_rule():
        _run("iptables", "-D", *FORWARD_RULE)
    _run("ip", "link", "del", BRIDGE, check=False)
    _unmount_under(STATE)
    subprocess.run(["rm", "-rf", str(STATE)], capture_output=True, check=False)  # noqa: S603,S607
    with contextlib.suppress(OSError):
        STATE.parent.rmdir()  # when no other swarm of this checkout is left
    return f"removed {len(nodes)} node(s)" if nodes else "nothing to remove"


def main(argv: list[str]) -> int:
    args = argv[1:]
    try:
        if args[:1] == ["up"] and len(args) <= 2:
            print(json.dumps(swarm_up(int(args[1]) if len(args) == 2 else 3)))
            return 0
        if args == ["down"]:
            print(f"swarm: {swarm_down()}", file=sys.stderr)
            return 0
        if args[:1] == ["kill"] and len(args) == 2:
            kill_node(args[1])
            return 0
        if args[:1] == ["revive"] and len(args) == 2:
            revive_node(args[1])
            return 0
    except EngineError as exc:
        print(f"swarm: {exc}", file=sys.stderr)
        return 1
    usage = "up [NODES] | down | kill NODE | revive NODE"
    print(f"usage: python deploy/swarm.py {usage}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
