"""What the sandbox (agent_server/sandbox.py) adds to a turn's spawn.

Side by side in one run, interleaved in pairs (ABBA order, so drift and warm-up fall on
both sides alike), as root with bubblewrap:

- spawns: the runtime's own spawn path (`CliProcesses.run`) of a trivial command
  (`/bin/true`), as the agent user directly (the separate-user spawn, as before the
  sandbox) and wrapped in the sandbox (bwrap's namespaces and mounts, the drop to the
  user, the relay to the forwarder's socket started and listening, then the command);
- stages: where the sandboxed spawn's time goes, each stage alone (bwrap with its
  mounts around `/bin/true`, + setpriv, + the init script with its relay);
- turns: real turns through two real agent servers (the real Claude Code CLI against
  the simulator), one with `TRINITY_AGENT_SANDBOX=off`, one sandboxed.

Added = sandboxed median - separate-user median.

    .venv/bin/python bench/sandbox.py [--spawns 200] [--turns 20]

Target: at most 50 ms added to a turn's spawn (median).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_server.isolation import (  # noqa: E402
    DEFAULT_AGENT_USER,
    AgentUser,
    resolve_agent_user,
)
from agent_server.runtimes.process import CliProcesses  # noqa: E402
from agent_server.sandbox import (  # noqa: E402
    NAMESPACES,
    Sandbox,
    drop_to,
    filesystem,
    init_script,
    sandbox_probe,
    sandbox_tools,
)
from bench._setup import line, machine, quantile  # noqa: E402
from simulator.process import ChildStartError, ListeningProcess, SimulatorProcess  # noqa: E402

TARGET_MS = 50.0
TRUE = shutil.which("true") or "/bin/true"


@contextmanager
def places(user: AgentUser) -> Iterator[dict[str, Path]]:
    """A work dir and HOME of the agent user's, and a root-only forwarder socket."""
    root = Path(tempfile.mkdtemp(prefix="trinity-bench-sandbox-"))
    root.chmod(0o755)
    private = root / "server"
    private.mkdir(mode=0o700)
    found = {"root": root, "socket": private / "forwarder.sock"}
    for name in ("work", "home"):
        path = root / "area" / name
        path.mkdir(parents=True)
        os.chown(path, user.uid, user.gid)
        path.chmod(0o700)
        found[name] = path
    try:
        yield found
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def spawn_pairs(
    user: AgentUser, sandbox: Sandbox, where: dict[str, Path], pairs: int
) -> dict[str, list[float]]:
    plain = CliProcesses(label="true", run_as=user)
    wrapped = CliProcesses(label="true", run_as=user, sandbox=sandbox)
    times: dict[str, list[float]] = {"separate-user": [], "sandbox": []}

    async def once(kind: str, processes: CliProcesses) -> None:
        started = time.perf_counter()
        done = await processes.run(
            [TRUE],
            stdin=b"",
            cwd=where["work"],
            home=where["home"],
            env={"PATH": "/usr/bin:/bin", "HOME": str(where["home"])},
            timeout=30,
            execution_id="bench",
        )
        times[kind].append((time.perf_counter() - started) * 1000)
        assert done.returncode == 0, done.stderr

    for index in range(pairs):
        order = [("separate-user", plain), ("sandbox", wrapped)]
        for kind, processes in order if index % 2 == 0 else reversed(order):
            await once(kind, processes)
    return times


def stage_times(sandbox: Sandbox, where: dict[str, Path], runs: int) -> dict[str, list[float]]:
    """Each stage of the sandboxed spawn alone, interleaved."""
    tools = sandbox.tools
    mounts = [
        tools.bwrap,
        *NAMESPACES,
        *filesystem(readonly=(), writable=(where["work"], where["home"])),
        "--bind",
        str(sandbox.forwarder_socket),
        "/run/trinity/forwarder.sock",
        "--",
    ]
    stages: dict[str, list[str]] = {
        "fork+exec /bin/true (no sandbox)": [TRUE],
        "bwrap: namespaces and mounts": [*mounts, TRUE],
        "+ setpriv to the agent user": [*mounts, *drop_to(tools.setpriv, sandbox.user), TRUE],
        "+ init script: relay listening": [
            *mounts,
            *drop_to(tools.setpriv, sandbox.user),
            tools.shell,
            "-c",
            init_script(tools.relay),
            "trinity-sandbox",
            TRUE,
        ],
    }
    times: dict[str, list[float]] = {name: [] for name in stages}
    for _ in range(runs):
        for name, argv in stages.items():
            started = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)  # noqa: S603 - fixed argv
            times[name].append((time.perf_counter() - started) * 1000)
    return times


class BenchServer(ListeningProcess):
    """One agent server on a Unix socket (the local runtime's way), for real turns."""

    banner = "agent server"
    start_error = ChildStartError

    def __init__(self, *, env: dict[str, str], log_path: Path) -> None:
        super().__init__(startup_timeout=60.0, stop_timeout=15.0, log_path=log_path)
        self.env = env
        self.socket_dir = Path(tempfile.mkdtemp(prefix="bench-agent-"))
        self.client: httpx.Client | None = None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "agent_server", "--uds", str(self.socket_dir / "s.sock")]

    def environment(self) -> dict[str, str]:
        return self.env

    def await_ready(self, deadline: float) -> None:
        self.client = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.socket_dir / "s.sock")),
            base_url="http://agent-server",
            headers={"Authorization": f"Bearer {self.env['TRINITY_AGENT_SECRET']}"},
            timeout=httpx.Timeout(120.0, connect=5.0),
        )
        health = self.client.get("/health").json()
        wanted = "separate-user" if self.env["TRINITY_AGENT_SANDBOX"] == "off" else "sandbox"
        assert health["isolation"] == wanted, health

    def turn(self) -> float:
        assert self.client is not None
        body = {"execution_id": secrets.token_hex(8), "message": "say hi", "timeout_seconds": 90}
        started = time.perf_counter()
        answer = self.client.post("/api/task", json=body)
        elapsed = (time.perf_counter() - started) * 1000
        assert answer.status_code == 200, answer.text
        return elapsed

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        super().stop()
        shutil.rmtree(self.socket_dir, ignore_errors=True)


def turn_pairs(turns: int, work: Path) -> dict[str, list[float]]:
    token = "sk-ant-oat01-bench-" + secrets.token_hex(12)
    times: dict[str, list[float]] = {"separate-user": [], "sandbox": []}
    with SimulatorProcess(log_path=work / "simulator.log") as sim:
        sim.control.register(token, kind="oauth", label="bench")
        servers = {}
        for kind, mode in (("separate-user", "off"), ("sandbox", "required")):
            home = work / kind
            home.mkdir()
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "LANG": "C.UTF-8",
                "PYTHONPATH": str(ROOT),
                "TRINITY_AGENT_SECRET": secrets.token_hex(16),
                "TRINITY_AGENT_HOME": str(home),
                "TRINITY_ANTHROPIC_BASE_URL": sim.base_url,
                "CLAUDE_CODE_OAUTH_TOKEN": token,
                "TRINITY_AGENT_SANDBOX": mode,
                "TRINITY_AGENT_WORK_AREA": tempfile.mkdtemp(prefix=f"bench-area-{kind}-"),
            }
            servers[kind] = BenchServer(env=env, log_path=work / f"{kind}.log").start()
        try:
            for server in servers.values():
                server.turn()  # warm-up: the CLI's first start, its staged copy
            for index in range(turns):
                kinds = list(servers) if index % 2 == 0 else list(reversed(servers))
                for kind in kinds:
                    times[kind].append(servers[kind].turn())
        finally:
            for server in servers.values():
                server.stop()
                shutil.rmtree(server.env["TRINITY_AGENT_WORK_AREA"], ignore_errors=True)
    return times


def report(title: str, times: dict[str, list[float]], target: float | None) -> float:
    plain, boxed = times["separate-user"], times["sandbox"]
    added = statistics.median(boxed) - statistics.median(plain)
    print(f"\n{title} ({len(plain)} pairs)")
    print(line("separate-user spawn, median", statistics.median(plain), None, "ms"))
    print(line("sandboxed spawn, median", statistics.median(boxed), None, "ms"))
    print(line("sandboxed spawn, p95", quantile(boxed, 0.95), None, "ms"))
    print(line("added by the sandbox, median", added, target, "ms"))
    ratios = sorted(b / p for b, p in zip(boxed, plain, strict=True) if p > 0)
    print(line("sandboxed / separate-user, median pair ratio", ratios[len(ratios) // 2], None, "x"))
    return added


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spawns", type=int, default=200, help="spawn pairs")
    parser.add_argument("--stages", type=int, default=100, help="runs of each stage")
    parser.add_argument("--turns", type=int, default=20, help="real turn pairs (0: none)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the sandbox needs root: run this benchmark as root")
    tools = sandbox_tools()
    sandbox_probe(tools)
    user = resolve_agent_user(DEFAULT_AGENT_USER)
    print(machine())
    with places(user) as where:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(where["socket"]))
        listener.listen(1)
        sandbox = Sandbox(tools=tools, user=user, forwarder_socket=where["socket"])
        spawns = asyncio.run(spawn_pairs(user, sandbox, where, args.spawns))
        stages = stage_times(sandbox, where, args.stages)
        listener.close()
    added = report("spawn of /bin/true through CliProcesses.run", spawns, TARGET_MS)
    print(f"\nwhere a sandboxed spawn's time goes ({args.stages} runs each, medians)")
    for name, values in stages.items():
        print(line(name, statistics.median(values), None, "ms"))
    if args.turns:
        with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as work:
            turns = turn_pairs(args.turns, Path(work))
        report("real turns (the Claude Code CLI, simulator)", turns, TARGET_MS)
    return 0 if added <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
