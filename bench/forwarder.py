"""What the credential-injecting forwarder adds to an upstream request.

Side by side in one run, interleaved in pairs (ABBA order, so drift and warm-up fall on
both sides alike):

- direct:    the real Claude Code CLI -> tap -> simulator (the real token in its env);
- forwarded: the real Claude Code CLI -> tap -> forwarder -> simulator (a capability).

The tap is the same tiny TCP relay on both paths: it timestamps, per upstream request,
the request's first byte, the answer's first byte (time to first byte) and the end of
the chunked answer. Added = forwarded median - direct median, per upstream request.
A second, larger sample drives the same two paths with an httpx client streaming the
same Messages request (no CLI start-up in the loop, so many more requests per second).

    .venv/bin/python bench/forwarder.py [--pairs 20] [--requests 400]

Targets: at most 1 ms median added per upstream request, and the first streamed byte
not delayed (at most 1 ms added to the time to first byte).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_server.config import resolve_claude_bin  # noqa: E402
from agent_server.envlayer import FIXED_ENV  # noqa: E402
from agent_server.forwarder import Forwarder  # noqa: E402
from bench._setup import line, machine, quantile  # noqa: E402
from simulator.process import SimulatorProcess  # noqa: E402
from trinity_contract.redaction import Redactor  # noqa: E402

TARGET_MS = 1.0
CHUNK_END = b"0\r\n\r\n"


@dataclass
class Exchange:
    """One request/answer through a tap (perf_counter seconds)."""

    started: float
    first_byte: float | None = None
    finished: float | None = None

    @property
    def complete(self) -> bool:
        return self.first_byte is not None and self.finished is not None


@dataclass
class Tap:
    """A TCP relay to `target` that records every exchange it relays."""

    target: tuple[str, int]
    exchanges: list[Exchange] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        current: list[Exchange] = []

        async def upward() -> None:
            while data := await reader.read(65536):
                if not current or current[-1].finished is not None:
                    exchange = Exchange(started=time.perf_counter())
                    current.append(exchange)
                    self.exchanges.append(exchange)
                up_writer.write(data)
                await up_writer.drain()
            up_writer.close()

        async def downward() -> None:
            while data := await up_reader.read(65536):
                now = time.perf_counter()
                exchange = current[-1] if current else None
                if exchange is not None and exchange.first_byte is None:
                    exchange.first_byte = now
                writer.write(data)
                await writer.drain()
                if exchange is not None and data.endswith(CHUNK_END):
                    exchange.finished = time.perf_counter()
            writer.close()

        try:
            await asyncio.gather(upward(), downward())
        except (ConnectionError, OSError):
            pass

    async def start(self) -> None:
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class LoopThread:
    """An event loop of its own on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)


def cli_turn(binary: str, *, base_url: str, env_name: str, secret: str, home: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        env_name: secret,
        **FIXED_ENV,
    }
    done = subprocess.run(  # noqa: S603 - fixed argv
        [binary, "-p", "--output-format", "json"],
        input=b"say hi",
        env=env,
        cwd=home,
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the CLI failed ({done.returncode}): {done.stdout[-400:]!r}")


async def client_request(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> None:
    body = {
        "model": "claude-sonnet-5-5",
        "max_tokens": 16,
        "stream": True,
        "messages": [{"role": "user", "content": "say hi"}],
    }
    async with client.stream(
        "POST", url + "/v1/messages?beta=true", json=body, headers=headers
    ) as r:
        async for _ in r.aiter_raw():
            pass


def medians_ms(exchanges: list[Exchange]) -> tuple[float, float, float]:
    """(median total, median time to first byte, p95 total), in ms, of the complete ones."""
    exchanges = [e for e in exchanges if e.complete]
    totals = [(e.finished - e.started) * 1000 for e in exchanges]  # type: ignore[operator]
    firsts = [(e.first_byte - e.started) * 1000 for e in exchanges]  # type: ignore[operator]
    return statistics.median(totals), statistics.median(firsts), quantile(totals, 0.95)


def report(title: str, direct: Tap, forwarded: Tap) -> None:
    d_total, d_first, d_p95 = medians_ms(direct.exchanges)
    f_total, f_first, f_p95 = medians_ms(forwarded.exchanges)
    counts = [sum(e.complete for e in tap.exchanges) for tap in (direct, forwarded)]
    print(f"\n{title}: {counts[0]} direct, {counts[1]} forwarded upstream requests")
    print(line("  direct: median per upstream request", d_total, None, "ms"))
    print(line("  forwarded: median per upstream request", f_total, None, "ms"))
    print(line("  added per upstream request (median)", f_total - d_total, TARGET_MS, "ms"))
    print(line("  added per upstream request (p95)", f_p95 - d_p95, None, "ms"))
    print(line("  direct: time to first byte (median)", d_first, None, "ms"))
    print(line("  added to the time to first byte (median)", f_first - d_first, TARGET_MS, "ms"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20, help="CLI turns per side")
    parser.add_argument("--requests", type=int, default=400, help="client requests per side")
    args = parser.parse_args()
    binary = resolve_claude_bin(os.environ)
    workdir = Path(tempfile.mkdtemp(prefix="trinity-bench-forwarder-"))
    print(f"forwarder benchmark: {machine()}; CLI {binary}; logs in {workdir}")
    token = f"sk-ant-oat01-bench-{secrets.token_hex(8)}"
    with SimulatorProcess(log_path=workdir / "simulator.log", log_level="warning") as sim:
        sim.control.register(token, kind="oauth", label="bench")
        # The forwarder on a loop of its own, as in the agent server; the taps on another.
        forwarder_loop, tap_loop = LoopThread(), LoopThread()
        forwarder = Forwarder(upstream=sim.base_url, redactor=Redactor())
        forwarder_loop.run(forwarder.start())
        ports = int(sim.base_url.rsplit(":", 1)[1]), int(forwarder.base_url.rsplit(":", 1)[1])

        # Grants are two dict operations; taking them from this thread is safe under
        # the GIL, and keeps the bench's bookkeeping off the forwarder's loop.
        with forwarder.grant(shape="bearer", secret=token) as grant:
            direct, forwarded = tap_pair(tap_loop, *ports)
            cli_pairs(
                binary,
                direct,
                forwarded,
                credentials=(token, grant.capability),
                pairs=args.pairs,
                home=workdir / "home",
            )
            report(f"real CLI, {args.pairs} interleaved pairs", direct, forwarded)

            direct, forwarded = tap_pair(tap_loop, *ports)
            cpu_before = thread_cpu(forwarder_loop)
            asyncio.run(
                client_pairs(
                    direct, forwarded, credentials=(token, grant.capability), requests=args.requests
                )
            )
            cpu_ms = (thread_cpu(forwarder_loop) - cpu_before) * 1000 / args.requests
            report(f"httpx client, {args.requests} interleaved pairs", direct, forwarded)
            # The forwarder's own CPU per request, on its thread: what it adds on an
            # idle machine, whatever the load moves the wall-clock figures by.
            print(line("  forwarder CPU per request (its thread)", cpu_ms, TARGET_MS, "ms"))
        forwarder_loop.run(forwarder.aclose())
    shutil.rmtree(workdir, ignore_errors=True)


def tap_pair(loop: LoopThread, simulator_port: int, forwarder_port: int) -> tuple[Tap, Tap]:
    """Two fresh taps served on ``loop``: the direct one to the simulator, the other to
    the forwarder."""
    host = "127.0.0.1"
    direct, forwarded = Tap((host, simulator_port)), Tap((host, forwarder_port))
    loop.run(direct.start())
    loop.run(forwarded.start())
    return direct, forwarded


def cli_pairs(
    binary: str,
    direct: Tap,
    forwarded: Tap,
    *,
    credentials: tuple[str, str],
    pairs: int,
    home: Path,
) -> None:
    """``pairs`` CLI turns through each tap, in ABBA order, each from an empty ``home``:
    the direct one with the real token, the forwarded one with the capability
    (``credentials``, in that order)."""
    token, capability = credentials
    for i in range(pairs):
        order = [("direct", direct), ("forwarded", forwarded)]
        for side, tap in order if i % 2 == 0 else reversed(order):
            home.mkdir(exist_ok=True)
            cli_turn(
                binary,
                base_url=tap.url,
                env_name="CLAUDE_CODE_OAUTH_TOKEN",
                secret=token if side == "direct" else capability,
                home=home,
            )
            shutil.rmtree(home)


async def client_pairs(
    direct: Tap, forwarded: Tap, *, credentials: tuple[str, str], requests: int
) -> None:
    """``requests`` streamed Messages requests through each tap, in ABBA order: the
    direct one with the real token, the forwarded one with the capability."""
    token, capability = credentials
    async with httpx.AsyncClient(timeout=30) as client:
        for i in range(requests):
            sides = [
                (direct.url, {"authorization": f"Bearer {token}"}),
                (forwarded.url, {"authorization": f"Bearer {capability}"}),
            ]
            for url, headers in sides if i % 2 == 0 else reversed(sides):
                await client_request(client, url, headers)


def thread_cpu(loop: LoopThread) -> float:
    """The CPU seconds ``loop``'s thread has used so far."""

    async def now() -> float:
        return time.thread_time()

    return float(loop.run(now()))


if __name__ == "__main__":
    main()
