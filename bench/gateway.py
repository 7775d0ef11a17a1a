"""What the gateway adds to a person's own CLI request, beside a bare relay and LiteLLM.

    BENCH_DATABASE_URL=postgres://root@127.0.0.1:5432/trinity \\
    BENCH_REDIS_URL=redis://127.0.0.1:6379/3 \\
    .venv/bin/python bench/gateway.py [--requests 400] [--concurrent 200] [--bursts 3]
        [--paths direct,splice,gateway,litellm]

Side by side in one run, on the same requests, in a rotating order (request i starts
at path i mod n, so drift and warm-up fall on every path alike), each path with its
own pooled httpx client:

- direct:  client -> provider simulator (the plan's own credential);
- splice:  client -> a plain TCP splice relay (``bench/_splice.py``, asyncio, raw bytes
  both ways, TCP_NODELAY) -> simulator: the floor of any extra hop;
- gateway: client -> ``python -m gateway`` (a gateway key; it picks the plan, injects
  its credential, relays) -> simulator;
- litellm: client -> LiteLLM's proxy (``litellm[proxy]`` in a bench-only venv,
  ``.venv-bench-litellm``, installed on first run; a generated config: the simulator as
  an Anthropic upstream, a master key, no database) -> simulator, on ``/v1/messages``.

Requests of about 50 KB shaped as the CLIs send them (``bench/_gateway_requests.py``):
Claude Code's Messages request and the Codex CLI's Responses request, each streamed
and not (Responses on direct, splice and gateway only). Per request: the total time
and, streamed, the time to the first byte of the answer's body. Medians and p99;
added = a path's quantile minus direct's. Then ``--bursts`` rounds per path of
``--concurrent`` streamed Messages requests at once (direct, splice, gateway, in a
rotating order): every one served, added p99, and the gateway's CPU per request
(utime + stime of its process tree from /proc, before and after).

Targets (ratio = measured / target, ≤ 1 within target): the gateway adds at most 1 ms
median and 3 ms p99 more than the splice relay, and at most 1 ms more to the first
streamed byte; at ``--concurrent`` streams every request is served and the added p99
is at most 10 ms; the gateway adds at most a tenth of what LiteLLM adds (ratio =
gateway added / (LiteLLM added / 10)).

The gateway path runs on Postgres and Redis: a throwaway database beside the one
BENCH_DATABASE_URL names (dropped afterwards) and the empty Redis database
BENCH_REDIS_URL names (flushed afterwards). Without the gateway path
(``--paths direct,splice,litellm``) neither is needed. Traffic stays on loopback, and
every process it starts (simulator, splice relay, gateway, LiteLLM) is stopped on the
way out. Logs are kept in a temporary directory printed at the start (removed after a
clean run unless ``--profile`` wrote its stats there).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Coroutine, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _gateway_rig as rig  # noqa: E402
from bench._gateway_requests import (  # noqa: E402
    encoded,
    messages_body,
    responses_body,
    session_id,
)
from bench._setup import (  # noqa: E402
    boot,
    empty_redis,
    line,
    machine,
    quantile,
    throwaway_postgres,
    turn_backends,
    web_environ,
)
from simulator.process import SimulatorProcess  # noqa: E402

PATHS = ("direct", "splice", "gateway", "litellm")
TARGET_VS_SPLICE_MEDIAN_MS = 1.0
TARGET_VS_SPLICE_P99_MS = 3.0
TARGET_VS_SPLICE_FIRST_BYTE_MS = 1.0
TARGET_CONCURRENT_ADDED_P99_MS = 10.0
LITELLM_SHARE = 10  # the gateway adds at most a tenth of what LiteLLM adds
MASTER_KEY = "sk-bench-litellm-master"
CLAUDE_HEADERS = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14",
    "user-agent": "claude-cli/2.0.0 (external, cli)",
    "x-app": "cli",
    "content-type": "application/json",
}
CODEX_HEADERS = {
    "originator": "codex_cli_rs",
    "user-agent": "codex_cli_rs/0.50.0",
    "openai-beta": "responses=experimental",
    "content-type": "application/json",
    "accept": "text/event-stream",
}


@dataclass(frozen=True)
class Kind:
    """One kind of request: its API, whether it streams, what ends a served answer."""

    name: str
    api: str  # "messages" | "responses"
    stream: bool
    body: bytes
    served_marker: bytes


@dataclass(frozen=True)
class Route:
    url: str
    headers: dict[str, str]


@dataclass
class Path_:
    """One way to the simulator: a pooled client, a route per API it serves, and the
    process (if any) whose CPU it costs."""

    name: str
    client: httpx.AsyncClient
    routes: dict[str, Route]
    pid: int | None = None


@dataclass
class Sample:
    total_ms: float
    first_ms: float | None
    served: bool


@dataclass
class Tally:
    """Every sample of one path on one kind, and the first failure seen."""

    samples: list[Sample] = field(default_factory=list)
    failure: str = ""

    def served(self) -> list[Sample]:
        return [s for s in self.samples if s.served]

    def totals(self) -> list[float]:
        return [s.total_ms for s in self.served()]

    def firsts(self) -> list[float]:
        return [s.first_ms for s in self.served() if s.first_ms is not None]


Results = dict[tuple[str, str], Tally]  # (path, kind) -> tally


def kinds() -> list[Kind]:
    """The four request kinds; one session per run (a person's CLI session)."""
    session = session_id()
    made = []
    for api, builder, marker in (
        ("messages", messages_body, b"message_stop"),
        ("responses", responses_body, b"response.completed"),
    ):
        for stream in (False, True):
            # A served non-streamed answer carries its usage; a streamed one its end event.
            served_marker = marker if stream else b'"usage"'
            name = f"{api}{' streamed' if stream else ''}"
            body = encoded(builder(stream=stream, session=session))
            made.append(Kind(name, api, stream, body, served_marker))
    return made


async def measure(path: Path_, kind: Kind) -> Sample:
    """Send ``kind``'s request on ``path``; its times (ms) and whether it was served."""
    route = path.routes[kind.name]
    chunks: list[bytes] = []
    first: float | None = None
    started = time.perf_counter()
    try:
        async with path.client.stream(
            "POST", route.url, content=kind.body, headers=route.headers
        ) as answer:
            async for chunk in answer.aiter_raw():
                if first is None:
                    first = time.perf_counter()
                chunks.append(chunk)
            status = answer.status_code
    except httpx.HTTPError as exc:
        raise Failed(f"{type(exc).__name__}: {exc}") from exc
    finished = time.perf_counter()
    body = b"".join(chunks)
    if status != 200 or kind.served_marker not in body:
        raise Failed(f"HTTP {status}: {body[:300]!r}")
    first_ms = (first - started) * 1000 if first is not None and kind.stream else None
    return Sample((finished - started) * 1000, first_ms, True)


class Failed(Exception):
    """A request that was not served (its status and the start of its answer)."""


async def recorded(results: Results, path: Path_, kind: Kind) -> None:
    tally = results.setdefault((path.name, kind.name), Tally())
    try:
        tally.samples.append(await measure(path, kind))
    except Failed as failed:
        tally.samples.append(Sample(0.0, None, False))
        tally.failure = tally.failure or str(failed)


async def interleaved(paths: list[Path_], kinds_: list[Kind], rounds: int) -> Results:
    """``rounds`` rounds; in each, every kind on every path serving it, the order of
    the paths rotated by one each round."""
    results: Results = {}
    for i in range(rounds):
        for kind in kinds_:
            serving = [p for p in paths if kind.name in p.routes]
            shift = i % len(serving)
            for path in serving[shift:] + serving[:shift]:
                await recorded(results, path, kind)
    return results


async def bursts(
    crowds: list[list[Path_]], kind: Kind, *, rounds: int, spread_s: float = 0.0
) -> tuple[Results, dict[str, float]]:
    """``rounds`` bursts per path, each one request on every client of the path's crowd
    (the paths' order rotated each round): at once, or their starts spread evenly over
    ``spread_s``; the results, and each path's process CPU seconds over its own
    bursts. Each request's time counts from its own start."""
    results: Results = {}
    cpu: dict[str, float] = {}
    for i in range(rounds):
        shift = i % len(crowds)
        for crowd in crowds[shift:] + crowds[:shift]:
            name, pid = crowd[0].name, crowd[0].pid
            before = rig.tree_cpu_seconds(pid) if pid else 0.0
            step = spread_s / len(crowd)
            await asyncio.gather(
                *(later(j * step, recorded(results, path, kind)) for j, path in enumerate(crowd))
            )
            if pid:
                cpu[name] = cpu.get(name, 0.0) + rig.tree_cpu_seconds(pid) - before
    return results, cpu


async def later(delay: float, work: Coroutine[Any, Any, None]) -> None:
    await asyncio.sleep(delay)
    await work


def crowd_of(path: Path_, concurrent: int) -> list[Path_]:
    """``concurrent`` copies of ``path``, each with a client of its own (one connection):
    httpcore's pool spends up to ~20 ms of the client's CPU per request when one client
    holds 200 connections, which would swamp what the paths add."""
    return [replace(path, client=client(1)) for _ in range(concurrent)]


def cpu_of(paths: list[Path_]) -> dict[str, float]:
    return {p.name: rig.tree_cpu_seconds(p.pid) for p in paths if p.pid}


# reporting


def stats(tally: Tally) -> tuple[float, float, float | None]:
    """(median total, p99 total, median first byte or None), in ms."""
    totals, firsts = tally.totals(), tally.firsts()
    first = statistics.median(firsts) if firsts else None
    return statistics.median(totals), quantile(totals, 0.99), first


def report_kind(results: Results, kind: Kind, names: list[str]) -> dict[str, tuple[float, ...]]:
    """Print one kind's figures per path; returns each served path's added (median, p99,
    first byte) against direct."""
    tallies = {n: results[(n, kind.name)] for n in names if (n, kind.name) in results}
    counts = ", ".join(f"{len(t.served())}/{len(t.samples)} {n}" for n, t in tallies.items())
    print(f"\n{kind.name} ({len(kind.body) / 1000:.1f} kB): served {counts}")
    for name, tally in tallies.items():
        if tally.failure:
            print(f"  {name}: first failure: {tally.failure}")
    if "direct" not in tallies or not tallies["direct"].totals():
        return {}
    d_median, d_p99, d_first = stats(tallies["direct"])
    print(line("  direct: median", d_median, None, "ms"))
    print(line("  direct: p99", d_p99, None, "ms"))
    if d_first is not None:
        print(line("  direct: first byte, median", d_first, None, "ms"))
    added: dict[str, tuple[float, ...]] = {}
    for name, tally in tallies.items():
        if name == "direct" or not tally.totals():
            continue
        median, p99, first = stats(tally)
        added[name] = (median - d_median, p99 - d_p99, (first or 0.0) - (d_first or 0.0))
        print(line(f"  {name}: added, median", added[name][0], None, "ms"))
        print(line(f"  {name}: added, p99", added[name][1], None, "ms"))
        if first is not None:
            print(line(f"  {name}: added to the first byte, median", added[name][2], None, "ms"))
    return added


def report_targets(kind: Kind, added: dict[str, tuple[float, ...]]) -> None:
    """The targets' ratios for one kind (those whose paths ran)."""
    gateway, splice, litellm = added.get("gateway"), added.get("splice"), added.get("litellm")
    if gateway is not None and splice is not None:
        vs = [g - s for g, s in zip(gateway, splice, strict=True)]
        print(line("  gateway - splice, added median", vs[0], TARGET_VS_SPLICE_MEDIAN_MS, "ms"))
        print(line("  gateway - splice, added p99", vs[1], TARGET_VS_SPLICE_P99_MS, "ms"))
        if kind.stream:
            target = TARGET_VS_SPLICE_FIRST_BYTE_MS
            print(line("  gateway - splice, added to the first byte, median", vs[2], target, "ms"))
    if gateway is not None and litellm is not None and litellm[0] > 0:
        share = litellm[0] / LITELLM_SHARE
        print(line("  gateway added / (litellm added / 10), median", gateway[0], share, "ms"))


def report_bursts(
    results: Results,
    kind: Kind,
    cpu: dict[str, float],
    *,
    args: argparse.Namespace,
    spread_ms: int,
) -> None:
    """Served counts, quantiles and added p99 at ``concurrent`` streams; CPU per request."""
    how = (
        f"started over {spread_ms} ms, each answer held {args.hold_ms + spread_ms} ms"
        if spread_ms
        else f"started at once, each answer held {args.hold_ms} ms"
    )
    print(
        f"\n{args.concurrent} concurrent {kind.name} requests, {args.bursts} bursts per path, "
        f"{how}: {machine()}"
    )
    direct = results.get(("direct", kind.name))
    d_p99 = quantile(direct.totals(), 0.99) if direct and direct.totals() else None
    for (name, _), tally in results.items():
        sent, served = len(tally.samples), len(tally.served())
        print(line(f"  {name}: served (%)", 100.0 * served / sent, None, "%"))
        if tally.failure:
            print(f"  {name}: first failure: {tally.failure}")
        if not served:
            continue
        median, p99, first = stats(tally)
        print(line(f"  {name}: median / p99", median, None, "ms") + f"  p99 {p99:.2f} ms")
        if first is not None:
            print(line(f"  {name}: first byte, median", first, None, "ms"))
        if name != "direct" and d_p99 is not None:
            target = TARGET_CONCURRENT_ADDED_P99_MS if name == "gateway" else None
            print(line(f"  {name}: added p99 (vs direct)", p99 - d_p99, target, "ms"))
        if name in cpu:
            print(line(f"  {name}: process CPU per request", cpu[name] * 1000 / sent, None, "ms"))


def report_cpu(before: dict[str, float], after: dict[str, float], results: Results) -> None:
    """Each hop's process CPU per request it relayed over the interleaved rounds."""
    print("\nprocess CPU per request (interleaved rounds, utime + stime of its tree):")
    for name, start in before.items():
        sent = sum(len(t.samples) for (n, _), t in results.items() if n == name)
        if sent:
            print(line(f"  {name}", (after[name] - start) * 1000 / sent, None, "ms"))


# the paths


def client(connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(timeout=httpx.Timeout(60.0), limits=limits)


def make_paths(
    names: list[str],
    *,
    urls: dict[str, str],
    pids: dict[str, int],
    secrets_: dict[str, str],
) -> list[Path_]:
    """A ``Path_`` per name: a route per kind it serves, each with its own credential.

    Direct (and the splice in front of it) sends what a CLI sends to the provider:
    Messages with the plan's token, streamed Responses to the ChatGPT backend with the
    plan's sign-in. The ChatGPT backend only streams, so a non-streamed Responses
    request goes to the platform's ``/v1/responses`` with an OpenAI key.
    """
    claude = {**CLAUDE_HEADERS, "authorization": f"Bearer {secrets_['claude']}"}
    codex = {
        **CODEX_HEADERS,
        "authorization": f"Bearer {secrets_['codex']}",
        "chatgpt-account-id": rig.CODEX_ACCOUNT,
    }
    platform = {**CODEX_HEADERS, "authorization": f"Bearer {secrets_['openai']}"}
    routes: dict[str, dict[str, Route]] = {}
    for name in ("direct", "splice"):
        base = urls[name]
        routes[name] = {
            "messages": Route(f"{base}/v1/messages?beta=true", claude),
            "messages streamed": Route(f"{base}/v1/messages?beta=true", claude),
            "responses": Route(f"{base}/v1/responses", platform),
            "responses streamed": Route(f"{base}/backend-api/codex/responses", codex),
        }
    if "gateway" in names:
        base, key = urls["gateway"], secrets_["gateway"]
        anthropic = Route(f"{base}/v1/messages?beta=true", {**CLAUDE_HEADERS, "x-api-key": key})
        openai = Route(f"{base}/v1/responses", {**CODEX_HEADERS, "authorization": f"Bearer {key}"})
        routes["gateway"] = {
            "messages": anthropic,
            "messages streamed": anthropic,
            "responses": openai,
            "responses streamed": openai,
        }
    if "litellm" in names:
        litellm = Route(
            f"{urls['litellm']}/v1/messages", {**CLAUDE_HEADERS, "x-api-key": MASTER_KEY}
        )
        routes["litellm"] = {"messages": litellm, "messages streamed": litellm}
    # One request at a time per path: its client keeps one warm connection.
    return [Path_(name, client(1), routes[name], pids.get(name)) for name in names]


# the run


def start_all(
    stack: ExitStack, names: list[str], workdir: Path, *, profile: Path | None
) -> tuple[list[Path_], SimulatorProcess]:
    """Start every process ``names`` needs (each stopped when ``stack`` closes), seed
    the credentials; the paths to measure, and the simulator."""
    sim = stack.enter_context(
        SimulatorProcess(log_path=workdir / "simulator.log", log_level="warning")
    )
    plans = rig.plans_seed(sim)
    splice = stack.enter_context(
        rig.SpliceProcess(target=sim.base_url, log_path=workdir / "splice.log")
    )
    assert splice.pid is not None
    urls = {"direct": sim.base_url, "splice": splice.base_url}
    pids = {"splice": splice.pid}
    secrets_ = {
        "claude": plans.claude_token,
        "codex": plans.codex_access,
        "openai": plans.openai_key,
    }
    if "gateway" in names:
        secrets_["gateway"] = rig.gateway_seed(plans)
        gateway = stack.enter_context(
            rig.gateway_process(
                sim_url=sim.base_url,
                environ=web_environ(),
                log_path=workdir / "gateway.log",
                profile=profile,
            )
        )
        urls["gateway"], pids["gateway"] = gateway.base_url, gateway.pid
    if "litellm" in names:
        litellm = stack.enter_context(
            rig.litellm_process(
                sim_url=sim.base_url,
                upstream_key=plans.claude_token,
                master_key=MASTER_KEY,
                workdir=workdir,
            )
        )
        urls["litellm"], pids["litellm"] = litellm.base_url, litellm.pid
    paths = make_paths(names, urls=urls, pids=pids, secrets_=secrets_)
    return paths, sim


async def run(paths: list[Path_], sim: SimulatorProcess, args: argparse.Namespace) -> bool:
    """Warm up, measure, report; True when every request was served."""
    kinds_ = kinds()
    try:
        results = await interleaved_phase(paths, kinds_, args)
        if args.bursts > 0:
            # LiteLLM serves no burst, and left running it spends CPU of its own (its
            # background tasks), taken from the paths that do: it sleeps meanwhile.
            with paused([p.pid for p in paths if p.name == "litellm" and p.pid]):
                results.update(await concurrent_phase(paths, sim, kinds_, args))
    finally:
        for path in paths:
            await path.client.aclose()
    return all(s.served for t in results.values() for s in t.samples)


@contextmanager
def paused(pids: list[int]) -> Iterator[None]:
    """The process groups of ``pids`` stopped (SIGSTOP) for the block, then continued."""
    for pid in pids:
        os.killpg(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.killpg(pid, signal.SIGCONT)


async def interleaved_phase(
    paths: list[Path_], kinds_: list[Kind], args: argparse.Namespace
) -> Results:
    """The warm-up, then ``--requests`` interleaved rounds, reported."""
    await interleaved(paths, kinds_, args.warmup)
    gc.collect()
    gc.freeze()  # what setup allocated is never scanned again mid-measurement
    before = cpu_of(paths)
    results = await interleaved(paths, kinds_, args.requests)
    after = cpu_of(paths)
    print(f"\n{args.requests} interleaved rounds: {machine()}")
    for kind in kinds_:
        report_targets(kind, report_kind(results, kind, [p.name for p in paths]))
    report_cpu(before, after, results)
    return results


async def concurrent_phase(
    paths: list[Path_], sim: SimulatorProcess, kinds_: list[Kind], args: argparse.Namespace
) -> Results:
    """``--bursts`` bursts of ``--concurrent`` streamed Messages requests per path (not
    LiteLLM), twice: all started at once (each answer held ``--hold-ms``), and their
    starts spread over ``--spread-ms`` with each answer held ``--spread-ms`` +
    ``--hold-ms``, so that all of them are open together for ``--hold-ms`` (the steady
    state of that many open streams, without the one instant at which they all
    arrive); reported apart, keyed apart from the interleaved results."""
    streamed = next(k for k in kinds_ if k.api == "messages" and k.stream)
    crowds = [
        crowd_of(p, args.concurrent) for p in paths if p.name in ("direct", "splice", "gateway")
    ]
    found: Results = {}
    try:
        # One burst per path first, discarded: each client opens its connection.
        sim.control.set_latency(args.hold_ms)
        await bursts(crowds, streamed, rounds=1)
        for spread_ms in (0, args.spread_ms):
            # Held answers keep every stream of a burst open at once, as real streams
            # that last seconds are.
            sim.control.set_latency(args.hold_ms + spread_ms)
            crowded, cpu = await bursts(
                crowds, streamed, rounds=args.bursts, spread_s=spread_ms / 1000
            )
            report_bursts(crowded, streamed, cpu, args=args, spread_ms=spread_ms)
            label = f"{streamed.name} x{args.concurrent}" + (" spread" if spread_ms else "")
            found.update({(name, label): t for (name, _), t in crowded.items()})
        sim.control.set_latency(0)
    finally:
        for crowd in crowds:
            for path in crowd:
                await path.client.aclose()
    return found


def print_profile(path: Path, top: int = 40) -> None:
    """The gateway's cProfile (its event loop thread's CPU time over the whole run): top
    functions by own time and by cumulative time."""
    import pstats

    if not path.exists():
        print(f"no profile at {path}: the gateway did not exit cleanly")
        return
    print(f"\ncProfile of the gateway's event loop thread (CPU time, whole run; {path}):")
    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="interleaved rounds measured")
    parser.add_argument("--warmup", type=int, default=20, help="interleaved rounds discarded")
    parser.add_argument("--concurrent", type=int, default=200, help="streams per burst")
    parser.add_argument("--bursts", type=int, default=3, help="measured bursts per path (0: none)")
    parser.add_argument(
        "--hold-ms", type=int, default=1000, help="the simulator holds each burst answer"
    )
    parser.add_argument(
        "--spread-ms",
        type=int,
        default=1000,
        help="the second round of bursts starts its requests over this long",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run the gateway under cProfile and print where its time went (slows it)",
    )
    parser.add_argument(
        "--paths", default=",".join(PATHS), help=f"comma-separated, of {', '.join(PATHS)}"
    )
    args = parser.parse_args()
    args.names = [n for n in PATHS if n in args.paths.split(",")]
    unknown = set(args.paths.split(",")) - set(PATHS)
    if unknown or "direct" not in args.names:
        parser.error(f"--paths: unknown {sorted(unknown)}" if unknown else "--paths needs direct")
    return args


def main() -> None:
    args = arguments()
    if "gateway" in args.names and (missing := rig.gateway_missing()):
        raise SystemExit(
            f"gateway path: {missing}; measure the others with --paths "
            + ",".join(n for n in args.names if n != "gateway")
        )
    with ExitStack() as stack:
        if "gateway" in args.names:
            database_url, redis_url = turn_backends()
            database = stack.enter_context(throwaway_postgres(database_url))
            stack.enter_context(empty_redis(redis_url))
            workdir = boot(database_url=database, redis_url=redis_url)
        else:
            workdir = Path(tempfile.mkdtemp(prefix="trinity-bench-gateway-"))
        profile = workdir / "gateway.prof" if args.profile else None
        print(f"gateway benchmark: {machine()}; paths {', '.join(args.names)}; logs in {workdir}")
        paths, sim = start_all(stack, args.names, workdir, profile=profile)
        print(f"started: {machine()}")
        served = asyncio.run(run(paths, sim, args))
    print(f"\nstopped every process: {machine()}")
    if profile is not None:
        print_profile(profile)
    if not served:
        raise SystemExit(f"some requests were not served (above); logs kept in {workdir}")
    if profile is None:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
