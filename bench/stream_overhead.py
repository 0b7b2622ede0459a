"""What consuming ``agent.stream()`` costs per turn against ``await agent.run()``.

Two settings, each ``run()`` vs ``stream()`` interleaved, median of several samples:

- engine only: an Agent with one async tool over ``ScriptedModel`` (K tool turns), where the
  event objects, the stream buffer and the consumer are the whole difference;
- over real HTTP: the same agent over the real OpenAI adapter against the fast fake server of
  ``bench/provider_overhead.py`` in its own process, SSE streaming on (``RunConfig(stream=True)``:
  text and tool-call deltas are events too), client CPU time per turn.

A benchmark, not a test: ``python bench/stream_overhead.py``. Only 127.0.0.1 is used.
``--split`` adds, engine only, where a streamed turn's extra time goes: ``run()`` with the model
streamed (``RunConfig(stream=True)``, nobody listening), then an observer taking every event,
then ``stream()``; and the test double's own streaming (``ScriptedModel.stream`` consumed
directly against ``complete``). ``--engine-only`` skips the HTTP setting.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import provider_overhead as po
from engine_turns import Count, lookup, lookup_sync, one_run, script

from agentloop import Agent, RunConfig
from agentloop.messages import Message
from agentloop.model import ModelRequest
from agentloop.testing import ScriptedModel

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


async def split_run(how: str, k: int = 100) -> float:
    """CPU us per turn of one run: ``run``, ``run_streamed``, ``observer_streamed``, ``stream``."""
    streamed = how != "run"
    agent = Agent(
        ScriptedModel(script(k, "lookup")),
        tools=[lookup, lookup_sync],
        config=RunConfig(stream=streamed),
        observers=[Count()] if how == "observer_streamed" else [],
    )
    started = time.process_time()
    if how == "stream":
        async with agent.stream("go") as events:
            async for _ in events:
                pass
    else:
        await agent.run("go")
    return (time.process_time() - started) / (k + 1) * 1e6


async def double_only(how: str, k: int = 100) -> float:
    """CPU us per model call of ``ScriptedModel`` alone: ``complete`` or ``stream`` consumed."""
    model = ScriptedModel(script(k, "lookup"))
    request = ModelRequest(messages=(Message.user("go"),))
    started = time.process_time()
    for _ in range(k + 1):
        if how == "complete":
            await model.complete(request)
        else:
            async for _event in model.stream(request):
                pass
    return (time.process_time() - started) / (k + 1) * 1e6


async def split(repeats: int) -> None:
    steps = {
        "run()": lambda: split_run("run"),
        "run(), model streamed": lambda: split_run("run_streamed"),
        "+ an observer taking every event": lambda: split_run("observer_streamed"),
        "stream()": lambda: split_run("stream"),
        "ScriptedModel.complete alone": lambda: double_only("complete"),
        "ScriptedModel.stream alone": lambda: double_only("stream"),
    }
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for make in steps.values():
        await make()
    for _ in range(repeats):
        for name, make in steps.items():
            gc.collect()
            samples[name].append(await make())
    print(f"\nengine only, K=100, CPU us per turn, min (median) of {repeats}:")
    for name, values in samples.items():
        print(f"  {name:<34} {min(values):7.1f} ({statistics.median(values):.1f})")


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", action="store_true", help="where the extra time goes")
    parser.add_argument("--engine-only", action="store_true", help="skip the HTTP setting")
    args = parser.parse_args()
    run_us, stream_us = await engine_only(30)
    print(
        f"engine only (ScriptedModel, K=100): run {run_us:.1f} us/turn, "
        f"stream {stream_us:.1f} us/turn (+{stream_us / run_us - 1:.1%})"
    )
    if args.split:
        await split(15)
    if args.engine_only:
        return
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
