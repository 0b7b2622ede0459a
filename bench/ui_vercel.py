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

A benchmark, not a test: ``python bench/ui_vercel.py [--quick]`` (the Vercel half of
``python bench/ui_protocols.py``, whose harness it uses). No network beyond 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from ui_protocols import MAKE, main

from agentloop.events import Event
from agentloop.ui._client_view import ClientView
from agentloop.ui._vercel_chunks import Chunks
from agentloop.ui.vercel import _started, encode


async def vercel() -> int:
    """One run as a request after its checks: entered, streamed into an ASGI ``send``."""
    session = MAKE[-1]().session()
    response = await _started(session.stream("go"), Chunks("m"), ClientView(), session)
    size = 0

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client stays until the response ends
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        nonlocal size
        size += len(message.get("body", b""))

    await response({"type": "http"}, receive, send)
    return size


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


if __name__ == "__main__":
    asyncio.run(main("Vercel"))
