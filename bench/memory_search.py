"""SPEC 27's goal: ``SQLiteMemoryStore.search(k=5)`` over 100,000 items in one namespace < 20 ms.

Fills a SQLite file with 100,000 items in one namespace (sentences of 8-20 words drawn from a
2,000-word vocabulary, Zipf-like, so common words match thousands of items and rare ones a few),
plus 20,000 in a neighbour namespace, then times 20 warm searches of 2-word queries and reports
the median (the goal), the 90th percentile and the slowest; the same for the newest items
(``query=""``) and for common-word queries (the worst case: ~10 % of the items match).

    python bench/memory_search.py                 # a temp file, removed after
    python bench/memory_search.py --items 200000  # more items

A benchmark, not a test: it writes ~30 MB and takes about a minute to fill.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from agentloop.memory import SQLiteMemoryStore

NS = ("user", "bench")
VOCABULARY = [f"w{n}" for n in range(2_000)]
WEIGHTS = [1 / (n + 1) for n in range(len(VOCABULARY))]
GOAL_MS = 20.0


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(VOCABULARY, WEIGHTS, k=rng.randint(8, 20)))


async def fill(store: SQLiteMemoryStore, items: int, rng: random.Random) -> None:
    batch = 5_000
    for start in range(0, items, batch):
        await store.put_many(NS, [sentence(rng) for _ in range(min(batch, items - start))])
    for _ in range(4):
        await store.put_many(("user", "neighbour"), [sentence(rng) for _ in range(5_000)])


async def timed(store: SQLiteMemoryStore, queries: list[str]) -> list[float]:
    for query in queries[:3]:  # warm
        await store.search(NS, query, k=5)
    took = []
    for query in queries:
        started = time.perf_counter()
        found = await store.search(NS, query, k=5)
        took.append((time.perf_counter() - started) * 1000)
        assert query == "" or found is not None
    return took


def report(name: str, took: list[float]) -> float:
    median = statistics.median(took)
    p90 = statistics.quantiles(took, n=10)[-1]
    print(f"{name:<28} median {median:7.2f} ms   p90 {p90:7.2f} ms   max {max(took):7.2f} ms")
    return median


async def main(items: int) -> int:
    rng = random.Random(27)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteMemoryStore(Path(tmp) / "memory.db")
        started = time.perf_counter()
        await fill(store, items, rng)
        print(
            f"filled {items:,} items (+20,000 next door) in {time.perf_counter() - started:.1f} s"
        )
        mixed = [f"{rng.choice(VOCABULARY)} {rng.choice(VOCABULARY)}" for _ in range(20)]
        common = [f"{rng.choice(VOCABULARY[:20])} {rng.choice(VOCABULARY[:20])}" for _ in range(20)]
        goal = report("2-word queries (the goal)", await timed(store, mixed))
        report("2 common words", await timed(store, common))
        report("newest (query='')", await timed(store, [""] * 20))
        await store.aclose()
    print(f"goal: median < {GOAL_MS:.0f} ms: {'met' if goal < GOAL_MS else 'NOT met'}")
    return 0 if goal < GOAL_MS else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    sys.exit(asyncio.run(main(parser.parse_args().items)))
