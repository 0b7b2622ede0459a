"""Shared helpers of the evals and cassettes tests: the fake provider server on its own thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agentloop.testing import FakeProviderServer, FakeReply


@contextmanager
def serving(steps: list[Any]) -> Iterator[FakeProviderServer]:
    """A fake OpenAI-compatible server on its own thread and event loop (for sync callers)."""
    loop = asyncio.new_event_loop()
    server = FakeProviderServer(steps, default=FakeReply("The script is over."))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
