"""What metering adds to an upstream request through the forwarder.

Side by side in one run, interleaved in pairs (ABBA order, so drift and warm-up fall
on both sides alike), on one forwarder in front of the provider simulator:

- metered:   a key grant as the agent server makes it (every answer's usage read);
- unmetered: a grant whose answers are relayed by the very same code path with the
  usage reader switched off (its `feed`/`finish` do nothing).

An httpx client streams the same Messages request through a TCP tap on each side (the
tap of bench/forwarder.py): added = metered median - unmetered median per upstream
request, wall clock, reported with the ratio of the two. The metering's own time is
also measured where it runs (every `feed` and `finish` call timed on the forwarder's
thread), per request, for the simulator's answer and for a long streamed answer (500
text deltas, cut into network-sized chunks), which is what a real CLI turn streams.

    .venv/bin/python bench/metering.py [--requests 400]

Target: metering adds at most 0.1 ms per upstream request.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_server.forwarder import Forwarder  # noqa: E402
from agent_server.metering import GrantMeter, RequestMeter  # noqa: E402
from bench._setup import line, machine  # noqa: E402
from bench.forwarder import LoopThread, Tap, client_request, medians_ms  # noqa: E402
from simulator.messages import Reply, sse_frame  # noqa: E402
from simulator.process import SimulatorProcess  # noqa: E402
from trinity_contract.prices import ANTHROPIC  # noqa: E402
from trinity_contract.redaction import Redactor  # noqa: E402

TARGET_MS = 0.1


class Stopwatch:
    """The time spent inside the metering calls, on the forwarder's thread."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.answers = 0


class TimedMeter(RequestMeter):
    """The real reader, each call timed."""

    watch: Stopwatch

    def feed(self, chunk: bytes) -> None:
        started = time.perf_counter()
        super().feed(chunk)
        self.watch.seconds += time.perf_counter() - started

    def finish(self) -> None:
        started = time.perf_counter()
        super().finish()
        self.watch.seconds += time.perf_counter() - started
        self.watch.answers += 1


class NullMeter(RequestMeter):
    """The same object on the relay path, reading nothing: metering off."""

    def feed(self, chunk: bytes) -> None:
        return None

    def finish(self) -> None:
        return None


class SwitchedGrantMeter(GrantMeter):
    """A grant's meter whose per-answer reader is `reader` (timed, or off)."""

    reader: type[RequestMeter] = RequestMeter
    watch: Stopwatch | None = None

    def request(self, *, headers: Mapping[str, str]) -> RequestMeter:
        self.requests += 1
        meter = self.reader(self, headers=headers)
        if isinstance(meter, TimedMeter) and self.watch is not None:
            meter.watch = self.watch
        return meter


def long_answer() -> list[bytes]:
    """A streamed answer of 500 text deltas, cut into 1-4 kB network reads."""
    reply = Reply({"messages": [{"role": "user", "content": "hi " * 3000}]}, "claude-sonnet-4-5")
    events = list(reply.sse_events())
    deltas = [
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": f"word {i} of a long answer "},
            },
        )
        for i in range(500)
    ]
    raw = b"".join(sse_frame(n, d) for n, d in [*events[:2], *deltas, *events[-3:]])
    chunks, at, size = [], 0, 1024
    while at < len(raw):
        chunks.append(raw[at : at + size])
        at += size
        size = 1024 + (size * 7) % 3072  # vary the read sizes like a socket does
    return chunks


def reader_cost_ms(chunks: list[bytes], runs: int = 2000) -> float:
    """The metering's time per answer for ``chunks``, in ms (best of 3 batches)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(runs):
            grant = GrantMeter(ANTHROPIC, budget_usd=5.0)
            reading = grant.request(headers={"content-type": "text/event-stream"})
            for chunk in chunks:
                reading.feed(chunk)
            reading.finish()
        best = min(best, (time.perf_counter() - started) / runs)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="client requests per side")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="trinity-bench-metering-"))
    print(f"metering benchmark: {machine()}; logs in {workdir}")
    with SimulatorProcess(log_path=workdir / "simulator.log", log_level="warning") as sim:
        side_by_side(sim, requests=args.requests)
    reader_alone()
    shutil.rmtree(workdir, ignore_errors=True)


def side_by_side(sim: SimulatorProcess, *, requests: int) -> None:
    """One forwarder, two grants on one key: ``requests`` interleaved pairs of client
    requests, one metered, one not; prints the medians and metering's own time."""
    key = f"sk-ant-api03-bench-{secrets.token_hex(8)}"
    sim.control.register(key, kind="api_key", label="bench", credit_usd=1e9)
    forwarder_loop, tap_loop = LoopThread(), LoopThread()
    forwarder = Forwarder(upstream=sim.base_url, redactor=Redactor())
    forwarder_loop.run(forwarder.start())
    port = int(forwarder.base_url.rsplit(":", 1)[1])
    watch = Stopwatch()
    with (
        forwarder.grant(shape="x-api-key", secret=key, budget_usd=1e9) as metered,
        forwarder.grant(shape="x-api-key", secret=key, budget_usd=1e9) as unmetered,
    ):
        on = SwitchedGrantMeter(ANTHROPIC, budget_usd=1e9)
        on.reader, on.watch = TimedMeter, watch
        off = SwitchedGrantMeter(ANTHROPIC, budget_usd=1e9)
        off.reader = NullMeter
        metered.meter, unmetered.meter = on, off
        taps = Tap(("127.0.0.1", port)), Tap(("127.0.0.1", port))
        for tap in taps:
            tap_loop.run(tap.start())
        on_tap, off_tap = taps

        async def many() -> None:
            async with httpx.AsyncClient(timeout=30) as client:
                for i in range(requests):
                    sides = [
                        (on_tap.url, {"x-api-key": metered.capability}),
                        (off_tap.url, {"x-api-key": unmetered.capability}),
                    ]
                    for url, headers in sides if i % 2 == 0 else reversed(sides):
                        await client_request(client, url, headers)

        asyncio.run(many())
    forwarder_loop.run(forwarder.aclose())
    on_total, on_first, _ = medians_ms(on_tap.exchanges)
    off_total, off_first, _ = medians_ms(off_tap.exchanges)
    print(f"\nhttpx client, {requests} interleaved pairs (one forwarder, two grants)")
    print(line("  unmetered: median per upstream request", off_total, None, "ms"))
    print(line("  metered: median per upstream request", on_total, None, "ms"))
    print(f"  {'metered / unmetered (median per request)':<58} {on_total / off_total:9.3f}")
    print(line("  added per upstream request (median)", on_total - off_total, TARGET_MS, "ms"))
    print(line("  added to the time to first byte (median)", on_first - off_first, None, "ms"))
    in_meter = watch.seconds * 1000 / max(watch.answers, 1)
    print(line("  metering's own time per request (timed in place)", in_meter, TARGET_MS, "ms"))
    print(f"  {'metering time / unmetered request time':<58} {in_meter / off_total:9.4f}")
    assert on.requests == requests and watch.answers == requests
    assert on.cost_usd > 0, "the metered grant read no usage"


def reader_alone() -> None:
    """The usage reader by itself: the simulator's reply, and a long streamed answer."""
    chunks = long_answer()
    size = sum(map(len, chunks))
    print(f"\nthe reader alone, on a long streamed answer ({size} bytes, {len(chunks)} reads)")
    long_ms = reader_cost_ms(chunks)
    short = [b"".join(sse_frame(n, d) for n, d in Reply({"messages": []}, "m").sse_events())]
    print(line("  per answer: the simulator's reply", reader_cost_ms(short), TARGET_MS, "ms"))
    print(line("  per answer: 500 text deltas", long_ms, TARGET_MS, "ms"))
    print(
        f"  {'per kB streamed (us)':<58} {statistics.fmean([long_ms * 1000 / (size / 1024)]):9.3f}"
    )


if __name__ == "__main__":
    main()
