"""Throughput at N concurrent runs: agentloop vs a raw aiohttp loop, and memory per run.

The fake OpenAI-compatible server of ``provider_overhead.py`` runs in its own process on
127.0.0.1 and answers from a cache (a ``lookup`` tool call while the conversation holds fewer
than K ``role: tool`` messages, then a final text; SSE when asked). Each run is K = 1 tool turn
and one final answer (two model calls). Two clients, from ``provider_overhead.py``:

- ``agentloop``: ``Agent(OpenAIClient(...), tools=[lookup])`` per run, default ``RunConfig``
  (the whole safety stack), ``stream`` off or on; one client (one connection pool) for all runs;
- ``raw aiohttp``: a hand loop on one ``aiohttp.ClientSession`` (json or SSE lines by hand).

The pools are sized alike unless told otherwise: agentloop's ``max_connections`` is
``--pool`` (default: agentloop's own default, ``DEFAULT_MAX_CONNECTIONS``) and the raw loop's
``TCPConnector(limit=...)`` is ``--raw-pool`` (default: the same number); the table's header
prints both. At N = 1000 a pool of 100 makes 900 runs wait for a connection, whichever client
holds it. A sample starts N runs at once
(``asyncio.gather``) ``--rounds`` times after one untimed batch (connections open, caches
warm); samples alternate between the clients and the median of ``--repeats`` is kept.
Reported per client and mode:

- runs/s: completed runs per second of wall time, and the ratio agentloop / raw aiohttp;
- client CPU ms per run and per model turn (``time.process_time`` of this process: the server
  burns its CPU in its own process), the ratio raw aiohttp / agentloop (runs per CPU second);
- KiB per concurrent run: the ``tracemalloc`` peak of one batch of N runs above what was
  allocated before it, divided by N (a separate, untimed batch: tracing is slow);
- RSS KiB per concurrent run: in a fresh process per client and mode, after a batch of 10 runs
  (modules and caches loaded), the peak resident set of one batch of N runs above the resident
  set before it, divided by N (Linux: the peak is reset through ``/proc/self/clear_refs`` and
  read as ``VmHWM``); what the process costs the machine, allocator overhead included.

    python bench/concurrency.py                      # N = 1000, JSON and SSE
    python bench/concurrency.py --runs 100 --profile # + cProfile of agentloop's batch
    python bench/concurrency.py --pool 100 --raw-pool 1000   # pools sized apart
    python bench/concurrency.py --split              # + OpenAIClient in a hand loop, no Agent

A benchmark, not a test. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from provider_overhead import AgentloopLoop, AiohttpLoop, ClientLoop, Loop, start_server

K = 1  # tool turns per run; one final answer follows


def clients(args: argparse.Namespace) -> list[Callable[[str], Loop]]:
    """The loops (``--split``: and ``OpenAIClient`` alone), each with its pool size."""
    loops: list[Callable[[str], Loop]] = [partial(AgentloopLoop, pool=args.pool)]
    if args.split:
        loops.append(partial(ClientLoop, pool=args.pool))
    return [*loops, partial(AiohttpLoop, pool=args.raw_pool)]


async def batch(loop: Loop, stream: bool, runs: int) -> int:
    """Start ``runs`` runs at once; the number of model calls they made."""
    return sum(await asyncio.gather(*(loop.run(stream) for _ in range(runs))))


class GCTimer:
    """CPU time spent in the cyclic garbage collector while installed (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start

    def __enter__(self) -> GCTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


async def sample(loop: Loop, stream: bool, runs: int, rounds: int) -> tuple[float, float, float]:
    """(wall s, client CPU s, GC s) of ``rounds`` batches of ``runs`` concurrent runs."""
    await batch(loop, stream, runs)  # warm-up
    gc.collect()
    calls = 0
    with GCTimer() as collector:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(rounds):
            calls += await batch(loop, stream, runs)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    assert calls == rounds * runs * (K + 1), f"{loop.name}: {calls} model calls"
    return wall, cpu, collector.seconds


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """The peak resident set (``VmHWM``) starts again from the current one (Linux)."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")


async def rss_child(args: argparse.Namespace) -> float:
    """In this (fresh) process: the peak RSS of a batch of ``runs`` above the RSS before it."""
    name, url = args.rss_child
    stream, runs = args.sse, args.runs
    by_name = {getattr(f, "func", f).name: f for f in clients(args)}  # partials of the classes
    loop = by_name[name](url)
    try:
        await batch(loop, stream, 10)  # modules and caches loaded, connections opened
        gc.collect()
        _reset_peak()
        before = _rss_kib("VmRSS")
        await batch(loop, stream, runs)
        return (_rss_kib("VmHWM") - before) / runs
    finally:
        await loop.aclose()


def rss_per_run(name: str, url: str, stream: bool, args: argparse.Namespace) -> float:
    """``rss_child`` in a fresh interpreter (RSS never shrinks back after a batch)."""
    argv = [sys.executable, os.path.abspath(__file__), "--rss-child", name, url]
    argv += ["--runs", str(args.runs), "--pool", str(args.pool), "--raw-pool", str(args.raw_pool)]
    argv += ["--sse"] * stream + ["--split"] * args.split
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


async def memory_per_run(loop: Loop, stream: bool, runs: int) -> float:
    """KiB the batch of ``runs`` concurrent runs held at its peak, per run."""
    await batch(loop, stream, runs)  # warm-up outside the trace
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        await batch(loop, stream, runs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return (peak - before) / runs / 1024


Key = tuple[str, bool]


async def measure(url: str, args: argparse.Namespace) -> dict[Key, dict[str, float]]:
    """Median wall/CPU per (client, stream) and one memory figure each."""
    samples: dict[Key, list[tuple[float, float, float]]] = {}
    memory: dict[Key, float] = {}
    rss: dict[Key, float] = {}
    for stream in (False, True):
        for _ in range(args.repeats):
            for factory in clients(args):
                loop = factory(url)
                try:
                    result = await sample(loop, stream, args.runs, args.rounds)
                finally:
                    await loop.aclose()
                samples.setdefault((loop.name, stream), []).append(result)
        for factory in clients(args):
            loop = factory(url)
            try:
                memory[(loop.name, stream)] = await memory_per_run(loop, stream, args.runs)
            finally:
                await loop.aclose()
            rss[(loop.name, stream)] = rss_per_run(loop.name, url, stream, args)
    total = args.runs * args.rounds
    return {
        key: {
            "runs_per_s": total / statistics.median(w for w, _, _ in values),
            "cpu_ms_per_run": statistics.median(c for _, c, _ in values) / total * 1e3,
            "gc_ms_per_run": statistics.median(g for _, _, g in values) / total * 1e3,
            "kib_per_run": memory[key],
            "rss_kib_per_run": rss[key],
        }
        for key, values in samples.items()
    }


def report(results: dict[Key, dict[str, float]], args: argparse.Namespace) -> None:
    """The table: every ratio from the same samples."""
    print(f"\nN = {args.runs} concurrent runs (K = {K} tool turn + 1 answer), median of "
          f"{args.repeats} samples of {args.rounds} batch(es); python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    print(f"pools: agentloop max_connections={args.pool}, raw aiohttp "
          f"TCPConnector(limit={args.raw_pool})")  # fmt: skip
    print()
    print("| mode | client | runs/s | vs raw aiohttp | client CPU ms/run | CPU us/turn | "
          "CPU ratio | of it GC ms/run | KiB/run | RSS KiB/run |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for stream in (False, True):
        base = results[("raw aiohttp", stream)]
        for name in [name for name, mode in results if mode == stream]:
            row = results[(name, stream)]
            cells = [
                "SSE" if stream else "JSON",
                name,
                f"{row['runs_per_s']:.0f}",
                f"{row['runs_per_s'] / base['runs_per_s']:.0%}",
                f"{row['cpu_ms_per_run']:.3f}",
                f"{row['cpu_ms_per_run'] / (K + 1) * 1e3:.0f}",
                f"{row['cpu_ms_per_run'] / base['cpu_ms_per_run']:.2f}x",
                f"{row['gc_ms_per_run']:.3f}",
                f"{row['kib_per_run']:.1f}",
                f"{row['rss_kib_per_run']:.1f}",
            ]
            print("| " + " | ".join(cells) + " |")


async def profile(url: str, args: argparse.Namespace) -> None:
    """cProfile of agentloop's batch of N runs (GC off, so its pauses land on no function)."""
    for stream in (False, True):
        loop = AgentloopLoop(url, pool=args.pool)
        try:
            await batch(loop, stream, args.runs)
            profiler = cProfile.Profile()
            gc.disable()
            profiler.enable()
            calls = await batch(loop, stream, args.runs)
            profiler.disable()
            gc.enable()
        finally:
            await loop.aclose()
        print_profile(profiler, calls, f"agentloop, {'SSE' if stream else 'JSON'}", args.top)


def print_profile(profiler: cProfile.Profile, calls: int, title: str, top: int) -> None:
    """Own time by file, then agentloop's functions by cumulative time: us per model call."""
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, object]]
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values())
    print(f"\n## cProfile: {title}, {calls} model calls, {total / calls * 1e6:.0f} us/call "
          "under the profiler (GC off)")  # fmt: skip
    by_file: dict[str, float] = {}
    for (path, _, _), entry in stats.items():
        by_file[_short(path)] = by_file.get(_short(path), 0.0) + entry[2]
    print("  -- own time by file, us per model call --")
    for path, seconds in sorted(by_file.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {seconds / calls * 1e6:7.1f}  {path}")
    print("  -- agentloop functions by cumulative time, us per model call --")
    ours = [(key, entry) for key, entry in stats.items() if "agentloop/" in key[0]]
    for (path, line, func), entry in sorted(ours, key=lambda kv: -kv[1][3])[:top]:
        print(f"  {entry[3] / calls * 1e6:7.1f}  {_short(path)}:{line}:{func}")


def _short(path: str) -> str:
    for marker in ("site-packages/", "src/", "lib/python3.11/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return os.path.basename(path) if path != "~" else "<builtins>"


async def main_async(args: argparse.Namespace) -> None:
    process, url = start_server(K)
    try:
        print(f"server {url} (pid {process.pid})")
        results = await measure(url, args)
        report(results, args)
        if args.profile:
            await profile(url, args)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="concurrent runs per batch (N)")
    parser.add_argument("--rounds", type=int, default=2, help="timed batches per sample")
    parser.add_argument("--repeats", type=int, default=5, help="samples per cell (median)")
    parser.add_argument("--profile", action="store_true", help="cProfile agentloop's batch")
    parser.add_argument("--top", type=int, default=30, help="functions listed by --profile")
    parser.add_argument("--pool", type=int, help="agentloop's max_connections (its default)")
    parser.add_argument("--raw-pool", type=int, help="the raw loop's limit (default: --pool)")
    parser.add_argument("--split", action="store_true", help="+ agentloop's client alone")
    parser.add_argument("--rss-child", nargs=2, help=argparse.SUPPRESS)  # NAME URL
    parser.add_argument("--sse", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pool is None:
        from agentloop.providers._http import DEFAULT_MAX_CONNECTIONS

        args.pool = DEFAULT_MAX_CONNECTIONS
    if args.raw_pool is None:
        args.raw_pool = args.pool
    if args.rss_child:
        print(f"{asyncio.run(rss_child(args)):.2f}")
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
