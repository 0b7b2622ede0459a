"""What ``VercelAIApp`` adds to ``agent.stream()`` per engine event (goal: at most +10 %).

The settings of ``bench/ui_protocols.py`` (the AG-UI half): one agent, five tool turns whose
text streams in 8-character deltas and whose call arguments stream too, then the answer; run
each way, interleaved, CPU time of this process (the machine is shared):

- ``stream``: ``async with agent.stream(...)`` consumed, nothing done with the events;
- ``Vercel``: the same run through the code a ``VercelAIApp`` request runs after its checks
  (the stream entered, the response object turning every event into UI message chunks and SSE
  bytes, handed to an ASGI ``send`` that keeps them), HTTP left out (a socket costs the same
  whatever protocol it carries);
- the translation alone: ``Chunks.feed`` and ``encode`` over a run's recorded events.

Two settings: the engine alone over ``ScriptedModel`` (the adapter's worst case: an event costs
the engine least there), and over real HTTP, the real OpenAI adapter streaming from the fast
fake server of ``bench/provider_overhead.py`` in its own process (client CPU only).

A benchmark, not a test: ``python bench/ui_vercel.py``. No network beyond 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import provider_overhead as po

from agentloop import Agent, RunConfig, tool
from agentloop.events import Event
from agentloop.testing import ScriptedModel, call
from agentloop.ui._vercel_chunks import Chunks
from agentloop.ui.vercel import _started, encode

TEXT = "The quick brown fox jumps over the lazy dog. " * 8  # 45 deltas of 8 characters
TURNS = 5  # tool turns before the answer
ROUNDS = 10  # runs a sample


@tool
async def lookup(key: str, detail: str) -> str:
    """Look a key up."""
    return f"{key}: found"


MAKE: list[Callable[[], Agent[Any]]] = []  # the agent of the setting being measured


def scripted_agent() -> Agent[Any]:
    steps: list[Any] = []
    for i in range(TURNS):
        steps.append([TEXT, call("lookup", {"key": f"k{i}", "detail": "x" * 64})])
    steps.append(TEXT)
    return Agent(ScriptedModel(steps), tools=[lookup])


def http_agent(loop: po.AgentloopLoop) -> Callable[[], Agent[Any]]:
    return lambda: Agent(loop.client, tools=[loop.tool], config=RunConfig(stream=True))


async def plain() -> int:
    count = 0
    async with MAKE[-1]().stream("go") as events:
        async for _ in events:
            count += 1
    return count


async def vercel() -> int:
    """One run as a request after its checks: entered, streamed into an ASGI ``send``."""
    session = MAKE[-1]().session()
    response = await _started(session.stream("go"), Chunks("m"))
    size = 0

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client stays until the response ends
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        nonlocal size
        size += len(message.get("body", b""))

    await response({"type": "http"}, receive, send)
    return size


async def recorded() -> list[Event]:
    async with MAKE[-1]().stream("go") as events:
        return [event async for event in events]


def translation(events: list[Event]) -> float:
    """CPU per event of the adapter's own work on recorded events (no engine, no I/O)."""
    rounds = 300
    gc.collect()
    start = time.process_time()
    for _ in range(rounds):
        chunks = Chunks("m")
        for event in events:
            made = chunks.feed(event)
            if made:
                encode(made)
    return (time.process_time() - start) / (rounds * len(events)) * 1e6


async def per_event(fn: Callable[[], Awaitable[int]], events: int) -> float:
    gc.collect()
    start = time.process_time()
    for _ in range(ROUNDS):
        await fn()
    return (time.process_time() - start) / (events * ROUNDS) * 1e6


async def compare(repeats: int) -> None:
    events = await plain()
    for _ in range(5):
        await plain()
        await vercel()
    base: list[float] = []
    over: list[float] = []
    for _ in range(repeats):
        base.append(await per_event(plain, events))
        over.append(await per_event(vercel, events))
    for how, pick in (("fastest", min), ("median", statistics.median)):
        b, o = pick(base), pick(over)
        print(
            f"  Vercel ({how} of {repeats}): stream {b:.2f} us/event, with the adapter "
            f"{o:.2f} us/event: +{o - b:.2f} us/event (+{o / b - 1:.1%}); {events} events a run"
        )
    replay = await recorded()
    own = min(translation(replay) for _ in range(5))
    share = own / min(base)
    print(f"  Vercel translation alone (replayed events): {own:.2f} us/event (+{share:.1%})")


async def main() -> None:
    MAKE.append(scripted_agent)
    print(f"engine only (ScriptedModel, {TURNS} tool turns + 1):")
    await compare(41)
    server, url = po.start_server(TURNS)
    loop = po.AgentloopLoop(url)
    MAKE.append(http_agent(loop))
    try:
        print("over HTTP (OpenAI adapter, SSE, the fake server of provider_overhead.py):")
        await compare(21)
    finally:
        await loop.aclose()
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    asyncio.run(main())
