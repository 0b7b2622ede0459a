"""Engine overhead per turn: an Agent with one tool over a ScriptedModel (no HTTP).

Runs K = 10 and K = 100 tool turns, many times, and prints microseconds per turn and the peak
memory of one run (tracemalloc). The ``stream`` rows consume the same run through
``agent.stream()`` (every event built and queued) and the ``observer`` rows through an observer
that takes every event; ``run()`` with nobody listening builds no event at all. A benchmark,
not a test: run `make bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc

from agentloop import Agent, Observer, tool
from agentloop.events import Event
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


class Count(Observer):
    def __init__(self) -> None:
        self.events = 0

    def on_event(self, event: Event) -> None:
        self.events += 1


async def one_run(k: int, name: str, how: str = "run") -> float:
    model = ScriptedModel(script(k, name))
    observers = [Count()] if how == "observer" else []
    agent = Agent(model, tools=[lookup, lookup_sync], observers=observers)
    started = time.perf_counter()
    if how == "stream":
        async with agent.stream("go") as events:
            async for _ in events:
                pass
    else:
        await agent.run("go")
    return time.perf_counter() - started


async def measure(k: int, name: str, repeats: int, how: str = "run") -> tuple[float, float]:
    for _ in range(3):
        await one_run(k, name, how)
    samples = []
    for _ in range(repeats):
        gc.collect()
        samples.append(await one_run(k, name, how))
    per_turn = statistics.median(samples) / (k + 1) * 1e6
    tracemalloc.start()
    await one_run(k, name, how)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return per_turn, peak / 1024


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(f"{'tool':<12} {'via':<9} {'K':>5} {'us/turn':>10} {'peak KiB/run':>14}")
    for name in ("lookup", "lookup_sync"):
        for k in (10, 100):
            per_turn, peak = await measure(k, name, args.repeats)
            print(f"{name:<12} {'run':<9} {k:>5} {per_turn:>10.1f} {peak:>14.1f}")
    for how in ("stream", "observer"):
        for k in (10, 100):
            per_turn, peak = await measure(k, "lookup", args.repeats, how)
            print(f"{'lookup':<12} {how:<9} {k:>5} {per_turn:>10.1f} {peak:>14.1f}")


if __name__ == "__main__":
    asyncio.run(main())
