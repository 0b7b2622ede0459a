"""The cyclic collector at N concurrent runs: agentloop, its client alone, and the raw loop.

``concurrency.py``'s three loops (``provider_overhead.py``'s fake server in its own process, one
tool turn and an answer a run, sessions of one agent) each run ``--batches`` batches of N runs
at once after a warm-up, with ``gc.callbacks`` watching. Printed per run, for each loop:

- CPU: ``time.process_time`` of this process (the server's CPU is its own);
- GC: the collector's CPU by generation, and how many collections of each generation ran;
- promoted: objects that survived a gen1 collection into the old generation (an upper bound:
  ``gc.get_objects`` of the young generations as each gen1 collection starts);
- alive: tracked objects more than before, per run, once the batch's runs wait on the server.

Why it matters (issue 39, docs/benchmarks.md): with 1,000 runs waiting at once, nearly every
container a run holds across its HTTP wait survives two young collections, and CPython 3.11
runs a full collection every 10 gen1 collections, each traversing every run's objects; so each
tracked object a run holds costs about 1-1.5 us of GC a run at N = 1,000, besides building it.

    python bench/gc_pressure.py                 # JSON, N = 1,000, 4 batches
    python bench/gc_pressure.py --sse --types   # SSE, and the types a run holds vs raw

A benchmark, not a test. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import concurrency
from provider_overhead import AgentloopLoop, AiohttpLoop, ClientLoop, start_server


class Watch:
    """``gc.callbacks`` entry: CPU and count by generation, and the objects promoted."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self.promoted = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        generation = info["generation"]
        if phase == "start":
            if generation == 1:
                self.promoted += len(gc.get_objects(0)) + len(gc.get_objects(1))
            self._start = time.process_time()
        else:
            self.seconds[generation] += time.process_time() - self._start
            self.count[generation] += 1


async def held(loop: Any, stream: bool, runs: int) -> collections.Counter[str]:
    """Tracked objects by type, more than before, once ``runs`` runs wait on the server."""
    gc.collect()
    gc.disable()
    try:
        before = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
        tasks = [asyncio.ensure_future(loop.run(stream)) for _ in range(runs)]
        for _ in range(6):
            await asyncio.sleep(0)
        after = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
        await asyncio.gather(*tasks)
    finally:
        gc.enable()
    return after - before


async def measure(args: argparse.Namespace) -> None:
    process, url = start_server(concurrency.K)
    types: dict[str, collections.Counter[str]] = {}
    try:
        for factory in (AgentloopLoop, ClientLoop, AiohttpLoop):
            loop = factory(url, pool=args.pool)
            try:
                await concurrency.batch(loop, args.sse, args.runs)
                gc.collect()
                watch = Watch()
                gc.callbacks.append(watch)
                start = time.process_time()
                for _ in range(args.batches):
                    await concurrency.batch(loop, args.sse, args.runs)
                cpu = time.process_time() - start
                gc.callbacks.remove(watch)
                types[loop.name] = held_now = await held(loop, args.sse, args.runs)
            finally:
                await loop.aclose()
            total = args.batches * args.runs
            per_gen = ", ".join(f"{s / total * 1e6:.1f}" for s in watch.seconds)
            alive = sum(held_now.values()) / args.runs
            print(
                f"{loop.name:17s} CPU {cpu / total * 1e6:6.1f} us/run | GC us/run by generation "
                f"[{per_gen}], collections {watch.count} | promoted/run "
                f"{watch.promoted / total:5.1f} | alive/run {alive:5.1f}",
                flush=True,
            )
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=10)
    if args.types:
        mine, raw = types["agentloop"], types["raw aiohttp"]
        print("\nalive per run: agentloop, raw aiohttp, type")
        for name, count in mine.most_common(40):
            print(f"{count / args.runs:6.2f} {raw.get(name, 0) / args.runs:6.2f} {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="concurrent runs per batch (N)")
    parser.add_argument("--batches", type=int, default=4, help="timed batches")
    parser.add_argument("--pool", type=int, default=100, help="connections, both clients")
    parser.add_argument("--sse", action="store_true", help="stream (SSE) instead of JSON")
    parser.add_argument("--types", action="store_true", help="the types a run holds vs raw")
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
