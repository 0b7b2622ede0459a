"""Engine overhead per turn: an Agent with one tool over a ScriptedModel (no HTTP).

Runs K = 10 and K = 100 tool turns, many times, and prints microseconds per turn and the peak
memory of one run (tracemalloc). A benchmark, not a test: run `make bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc

from agentloop import Agent, tool
from agentloop.testing import ScriptedModel, call, reply


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def lookup_sync(key: str) -> str:
    """Look a key up (sync: runs in a worker thread)."""
    return f"value of {key}"


def script(k: int, name: str) -> list[object]:
    return [call(name, {"key": f"k{i}"}) for i in range(k)] + [reply("done")]


async def one_run(k: int, name: str) -> float:
    model = ScriptedModel(script(k, name))
    agent = Agent(model, tools=[lookup, lookup_sync])
    started = time.perf_counter()
    await agent.run("go")
    return time.perf_counter() - started


async def measure(k: int, name: str, repeats: int) -> tuple[float, float]:
    for _ in range(3):
        await one_run(k, name)
    samples = []
    for _ in range(repeats):
        gc.collect()
        samples.append(await one_run(k, name))
    per_turn = statistics.median(samples) / (k + 1) * 1e6
    tracemalloc.start()
    await one_run(k, name)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return per_turn, peak / 1024


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(f"{'tool':<12} {'K':>5} {'us/turn':>10} {'peak KiB/run':>14}")
    for name in ("lookup", "lookup_sync"):
        for k in (10, 100):
            per_turn, peak = await measure(k, name, args.repeats)
            print(f"{name:<12} {k:>5} {per_turn:>10.1f} {peak:>14.1f}")


if __name__ == "__main__":
    asyncio.run(main())
