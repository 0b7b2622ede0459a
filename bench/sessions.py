"""What a conversation costs: ``agent.session()`` time and the memory of an idle session.

Builds one agent with one tool, then N sessions of it (no store), and prints microseconds per
``agent.session()`` call and the bytes each idle session holds (tracemalloc, after a GC). Also
prints the same for ``Agent(...)`` itself, the cost a per-request agent would pay instead, and
what one run costs as a session's history grows (``--long``: runs of one text answer on one
session, CPU per run at each history length; the engine with a test double, no HTTP). A
benchmark, not a test: ``.venv/bin/python bench/sessions.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc

from agentloop import Agent, tool
from agentloop.testing import FunctionModel, ScriptedModel, reply


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


def per_call_us(make: object, n: int, repeats: int) -> float:
    """Median microseconds per call of ``make`` over ``repeats`` batches of ``n``."""
    samples = []
    for _ in range(repeats):
        keep = []
        start = time.perf_counter()
        for _ in range(n):
            keep.append(make())  # type: ignore[operator]
        samples.append((time.perf_counter() - start) / n * 1e6)
        del keep
        gc.collect()
    return statistics.median(samples)


def bytes_each(make: object, n: int) -> float:
    """Bytes held by each of ``n`` live objects built by ``make``."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    keep = [make() for _ in range(n)]  # type: ignore[operator]
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del keep
    return (after - before) / n


async def long_session(blocks: int, per_block: int) -> None:
    """CPU microseconds per run as one session's history grows by two messages a run."""
    agent = Agent(FunctionModel(lambda request: reply("ok")), tools=[lookup])
    session = agent.session()
    print(f"\n{'history (messages)':<22}{'us per run':>12}")
    for _ in range(blocks):
        length = len(session.history)
        started = time.process_time()
        for _ in range(per_block):
            await session.run("go")
        spent = (time.process_time() - started) / per_block * 1e6
        print(f"{length:<22}{spent:>12.0f}")


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--long", action="store_true", help="+ a run's cost as history grows")
    args = parser.parse_args()
    agent = Agent(ScriptedModel([]), tools=[lookup])

    def new_agent() -> Agent[str | None]:
        return Agent(ScriptedModel([]), tools=[lookup])

    rows = [
        ("agent.session()", agent.session),
        ("Agent(...) with one tool", new_agent),
    ]
    print(f"{'what':<28}{'us per call':>14}{'KiB each (idle)':>18}")
    for name, make in rows:
        us = per_call_us(make, args.n, args.repeats)
        kib = bytes_each(make, args.n) / 1024
        print(f"{name:<28}{us:>14.1f}{kib:>18.2f}")
    if args.long:
        asyncio.run(long_session(blocks=6, per_block=250))


if __name__ == "__main__":
    main()
