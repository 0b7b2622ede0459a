"""Cooperative cancellation: a one-shot signal any holder (UI, watchdog, hook) can fire.

Firing a token cancels the asyncio task running each run that watches it, so every ``await``
inside a run (model call, stream event, tool call, backoff sleep, compaction) is a checkpoint;
the engine also checks the flag explicitly at run start, before each model call and between
sequential tool calls. ``cancel()`` is thread-safe.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from agentloop.errors import Cancelled

__all__ = ["CancelToken"]

_LOCK = threading.Lock()
"""What every token's flag and watchers change under: each holds it for a few instructions,
and a lock per token was one more object per session for the collector to scan."""


class CancelToken:
    """A one-shot cancel signal; ``reset()`` re-arms it."""

    __slots__ = ("_fired", "_watchers")

    def __init__(self) -> None:
        self._fired = False
        self._watchers: dict[int, tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = {}

    @property
    def cancelled(self) -> bool:
        """Whether the signal has fired."""
        return self._fired

    def is_cancelled(self) -> bool:
        """Whether the signal has fired."""
        return self._fired

    def cancel(self) -> None:
        """Fire the signal (idempotent); wakes every run watching this token."""
        with _LOCK:
            if self._fired:
                return
            self._fired = True
            watchers = list(self._watchers.values())
        for loop, callback in watchers:
            if not loop.is_closed():
                loop.call_soon_threadsafe(callback)

    def reset(self) -> None:
        """Re-arm the signal so the next run is not cancelled."""
        with _LOCK:
            self._fired = False

    def raise_if_cancelled(self) -> None:
        """Raise ``Cancelled`` when the signal has fired."""
        if self._fired:
            raise Cancelled()

    def watch(self, callback: Callable[[], None]) -> int:
        """Call ``callback`` on the running loop when the signal fires; returns a handle."""
        loop = asyncio.get_running_loop()
        with _LOCK:
            handle = id(callback)
            self._watchers[handle] = (loop, callback)
        return handle

    def unwatch(self, handle: int) -> None:
        """Stop calling a callback registered with ``watch``."""
        with _LOCK:
            self._watchers.pop(handle, None)
            if not self._watchers:  # an emptied dict keeps its table: an idle session's 160 B
                self._watchers = {}

    async def wait(self) -> None:
        """Return once the signal fires."""
        if self._fired:
            return
        done = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not done.done():
                done.set_result(None)

        handle = self.watch(wake)
        try:
            if self._fired:
                return
            await done
        finally:
            self.unwatch(handle)

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self._fired})"
