"""What consuming ``agent.stream()`` costs per turn against ``await agent.run()``.

Two settings, each ``run()`` vs ``stream()`` interleaved, median of several samples:

- engine only: an Agent with one async tool over ``ScriptedModel`` (K tool turns), where the
  event objects, the stream buffer and the consumer are the whole difference;
- over real HTTP: the same agent over the real OpenAI adapter against the fast fake server of
  ``bench/provider_overhead.py`` in its own process, SSE streaming on (``RunConfig(stream=True)``:
  text and tool-call deltas are events too), client CPU time per turn.

A benchmark, not a test: ``python bench/stream_overhead.py``. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import provider_overhead as po
from engine_turns import one_run

from agentloop import Agent, RunConfig

K = 10


async def engine_only(repeats: int) -> tuple[float, float]:
    samples: dict[str, list[float]] = {"run": [], "stream": []}
    for _ in range(3):
        for how in samples:
            await one_run(100, "lookup", how)
    for _ in range(repeats):
        for how, values in samples.items():
            gc.collect()
            values.append(await one_run(100, "lookup", how) / 101 * 1e6)
    return statistics.median(samples["run"]), statistics.median(samples["stream"])


async def over_http(url: str, repeats: int, conversations: int) -> tuple[float, float]:
    loop = po.AgentloopLoop(url)

    async def once(how: str) -> int:
        agent = Agent(loop.client, tools=[loop.tool], config=RunConfig(stream=True))
        if how == "run":
            run = await agent.run("go")
        else:
            async with agent.stream("go") as events:
                async for _ in events:
                    pass
            run = events.run
        return len(run.turns)

    samples: dict[str, list[float]] = {"run": [], "stream": []}
    try:
        for how in samples:
            await once(how)
        for _ in range(repeats):
            for how, values in samples.items():
                gc.collect()
                turns, cpu0 = 0, time.process_time()
                for _ in range(conversations):
                    turns += await once(how)
                values.append((time.process_time() - cpu0) / turns * 1e6)
    finally:
        await loop.aclose()
    return statistics.median(samples["run"]), statistics.median(samples["stream"])


async def main() -> None:
    run_us, stream_us = await engine_only(30)
    print(
        f"engine only (ScriptedModel, K=100): run {run_us:.1f} us/turn, "
        f"stream {stream_us:.1f} us/turn (+{stream_us / run_us - 1:.1%})"
    )
    server, url = po.start_server(K)
    try:
        run_us, stream_us = await over_http(url, 7, 20)
    finally:
        server.terminate()
    print(
        f"over HTTP (OpenAI adapter, SSE, K={K}): run {run_us:.1f} us/turn client CPU, "
        f"stream {stream_us:.1f} us/turn (+{stream_us / run_us - 1:.1%})"
    )


if __name__ == "__main__":
    asyncio.run(main())
