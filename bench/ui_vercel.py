"""What ``VercelAIApp`` adds to ``agent.stream()``, per event (the goal: at most +10 %).

The engine-only setting of ``bench/stream_overhead.py`` (an agent with one async tool over
``ScriptedModel``, K tool turns, then a text reply), consumed three ways, interleaved, median
of several samples of this process's CPU time (``time.process_time``: other work on a shared
machine does not count):

- ``stream``: ``agent.stream()`` read to the end (the baseline);
- ``chunks``: each event also turned into UI message chunks and encoded as SSE bytes (the
  adapter's whole per-event work: ``Chunks.feed`` and ``encode``);
- ``asgi``: the whole app called as ASGI in-process (a chat request parsed, a session picked,
  the run streamed through the response object into a ``send`` that keeps the bytes): per
  event, request handling included.

A benchmark, not a test: ``python bench/ui_vercel.py``. No socket is opened.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from engine_turns import lookup, script

from agentloop import Agent
from agentloop.testing import ScriptedModel
from agentloop.ui._vercel_chunks import Chunks
from agentloop.ui.vercel import VercelAIApp, encode

K = 100


def agent() -> Agent[Any]:
    return Agent(ScriptedModel(script(K, "lookup")), tools=[lookup])


async def via_stream() -> tuple[float, int]:
    a = agent()
    n = 0
    started = time.process_time()
    async with a.stream("go") as events:
        async for _ in events:
            n += 1
    return time.process_time() - started, n


async def via_chunks() -> tuple[float, int]:
    a = agent()
    chunks = Chunks("m")
    n = 0
    started = time.process_time()
    async with a.stream("go") as events:
        async for event in events:
            n += 1
            made = chunks.feed(event)
            if made:
                encode(made)
    return time.process_time() - started, n


async def via_asgi() -> tuple[float, int]:
    app = VercelAIApp(agent())
    message = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    body = json.dumps({"id": "b", "messages": [message]}).encode()
    scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}
    sent: list[Any] = []
    delivered = False
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    started = time.process_time()
    await app(scope, receive, send)
    elapsed = time.process_time() - started
    assert sent[0]["status"] == 200 and sent[-1]["body"] == b"data: [DONE]\n\n"
    return elapsed, _events_of(sent)


def _events_of(sent: list[Any]) -> int:
    return sum(m.get("body", b"").count(b"data: ") for m in sent[1:])


async def main() -> None:
    ways = {"stream": via_stream, "chunks": via_chunks, "asgi": via_asgi}
    for way in ways.values():
        for _ in range(3):
            await way()
    samples: dict[str, list[float]] = {name: [] for name in ways}
    events = 0
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 30):
        for name, way in ways.items():
            gc.collect()
            elapsed, n = await way()
            if name == "stream":
                events = n
            samples[name].append(elapsed)
    base = statistics.median(samples["stream"]) / events * 1e6
    print(f"K = {K} tool turns, {events} events per run")
    for name in ways:
        per_event = statistics.median(samples[name]) / events * 1e6
        print(f"{name:<7} {per_event:7.2f} us/event  {100 * (per_event / base - 1):+6.1f} %")


if __name__ == "__main__":
    asyncio.run(main())
