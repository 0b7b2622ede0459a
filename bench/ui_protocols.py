"""What the UI protocol adapters add to ``agent.stream()`` per engine event (goal: <= +10 %).

One agent over ``ScriptedModel`` (text streamed in 8-character deltas, a tool call with its
arguments streamed, then the answer), run N times each way, interleaved, median of samples:

- ``stream``: ``async with agent.stream(...)`` consumed, nothing done with the events;
- ``AG-UI``: the same run through the code an ``AGUIApp`` request runs after its checks (the
  translation to ``ag_ui.core`` events and the SSE bytes of ``EventEncoder``), HTTP left out
  (a socket costs the same whatever protocol it carries).

Two settings: the engine alone over ``ScriptedModel`` (the adapter's worst case: an event
costs the engine least there), and over real HTTP, the real OpenAI adapter streaming from the
fast fake server of ``bench/provider_overhead.py`` in its own process (client CPU only).

Samples are CPU time (the machine is shared), alternating; the fastest and the median are
printed. The figure is the adapter's time per engine event and its share of the stream's own.
A benchmark, not a test: ``python bench/ui_protocols.py [--quick]`` (``--quick``: 3 samples
each, a smoke run). No network at all.
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

from ag_ui import core
from ag_ui.encoder import EventEncoder

sys.path.insert(0, str(Path(__file__).parent))

import provider_overhead as po

from agentloop import Agent, RunConfig, tool
from agentloop.testing import ScriptedModel, call
from agentloop.ui._client_view import ClientView
from agentloop.ui.ag_ui import _RunStream

TEXT = "The quick brown fox jumps over the lazy dog. " * 8  # 45 deltas of 8 characters
TURNS = 5  # tool turns before the answer
ROUNDS = 10  # runs a sample


@tool
async def lookup(key: str, detail: str) -> str:
    """Look a key up."""
    return f"{key}: found"


MAKE: list[Callable[[], Agent[Any]]] = []  # the agent of the setting being measured


def make_agent() -> Agent[Any]:
    return MAKE[-1]()


def scripted_agent() -> Agent[Any]:
    steps: list[Any] = []
    for i in range(TURNS):
        steps.append([TEXT, call("lookup", {"key": f"k{i}", "detail": "x" * 64})])
    steps.append(TEXT)
    return Agent(ScriptedModel(steps), tools=[lookup])


def http_agent(loop: po.AgentloopLoop) -> Callable[[], Agent[Any]]:
    return lambda: Agent(loop.client, tools=[loop.tool], config=RunConfig(stream=True))


async def plain() -> int:
    agent = make_agent()
    count = 0
    async with agent.session().stream("go") as events:  # a session a run, as the app has
        async for _ in events:
            count += 1
    return count


async def ag_ui() -> int:
    agent = make_agent()
    run_input = core.RunAgentInput(
        thread_id="t", run_id="r", messages=[core.UserMessage(id="u", content="go")]
    )
    stream = _RunStream(EventEncoder(), run_input, agent.session(), None, ClientView())
    size = 0
    async for chunk in stream.chunks():
        size += len(chunk)
    return size


async def recorded() -> list[Any]:
    agent = make_agent()
    async with agent.stream("go") as events:
        return [event async for event in events]


def translation(events: list[Any]) -> float:
    """CPU per event of the adapter's own work on a run's recorded events (no engine, no I/O)."""
    from agentloop import events as ev
    from agentloop.ui._ag_ui_events import AGUIEvents

    rounds = 300
    gc.collect()
    start = time.process_time()
    for _ in range(rounds):
        out = AGUIEvents("t", "r")
        for event in events:
            text = out.feed(event)
            if type(event) is ev.RunFinished:
                text += out.finish(event.run)
            text.encode()
    return (time.process_time() - start) / (rounds * len(events)) * 1e6


async def per_event(fn: Callable[[], Awaitable[int]], events: int) -> float:
    """CPU time per engine event of ``ROUNDS`` runs (CPU, not wall: the machine is shared)."""
    gc.collect()
    start = time.process_time()
    for _ in range(ROUNDS):
        await fn()
    return (time.process_time() - start) / (events * ROUNDS) * 1e6


Translate = Callable[[list[Any]], float]
"""The adapter's own work per event over recorded events, in us (no engine, no I/O)."""


async def compare(
    name: str,
    adapter: Callable[[], Awaitable[int]],
    repeats: int,
    translate: Translate | None = None,
) -> None:
    events = await plain()
    for _ in range(5):
        await plain()
        await adapter()
    base: list[float] = []
    over: list[float] = []
    for _ in range(repeats):
        base.append(await per_event(plain, events))
        over.append(await per_event(adapter, events))
    for how, pick in (("fastest", min), ("median", statistics.median)):
        b, o = pick(base), pick(over)
        print(
            f"  {name} ({how} of {repeats}): stream {b:.2f} us/event, with the adapter "
            f"{o:.2f} us/event: +{o - b:.2f} us/event (+{o / b - 1:.1%}); {events} events a run"
        )
    if translate is not None:
        replay = await recorded()
        own = min(translate(replay) for _ in range(5))
        b = min(base)
        print(f"  {name} translation alone (replayed events): {own:.2f} us/event (+{own / b:.1%})")


def adapters() -> list[tuple[str, Callable[[], Awaitable[int]], Translate]]:
    """Every protocol adapter measured: AG-UI here, the Vercel AI stream in ``ui_vercel.py``."""
    sys.modules.setdefault("ui_protocols", sys.modules[__name__])  # run as a script: one harness
    import ui_vercel

    return [("AG-UI", ag_ui, translation), ("Vercel", ui_vercel.vercel, ui_vercel.translation)]


async def main(only: str | None = None) -> None:
    """Both settings for every adapter (``only``: one adapter by name; ``--quick``: 3 samples)."""
    quick = "--quick" in sys.argv[1:]
    chosen = [a for a in adapters() if only is None or a[0] == only]
    MAKE.append(scripted_agent)
    print(f"engine only (ScriptedModel, {TURNS} tool turns + 1):")
    for name, adapter, translate in chosen:
        await compare(name, adapter, 3 if quick else 41, translate)
    server, url = po.start_server(TURNS)
    loop = po.AgentloopLoop(url)
    MAKE.append(http_agent(loop))
    try:
        print("over HTTP (OpenAI adapter, SSE, the fake server of provider_overhead.py):")
        for name, adapter, translate in chosen:
            await compare(name, adapter, 3 if quick else 21, translate)
    finally:
        await loop.aclose()
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    asyncio.run(main())
