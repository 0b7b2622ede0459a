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

_NONE: dict[int, tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = {}
"""A token's further watchers while it has none (never written to: a token makes its own)."""


class CancelToken:
    """A one-shot cancel signal; ``reset()`` re-arms it."""

    __slots__ = ("_callback", "_fired", "_loop", "_watchers")

    def __init__(self) -> None:
        self._fired = False
        # the first watcher (a session's run, most of the time) in two slots: a run that
        # watches its session's token makes no table and no pair for the collector to scan
        self._loop: asyncio.AbstractEventLoop | None = None
        self._callback: Callable[[], None] | None = None
        self._watchers: dict[int, tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = _NONE
        """The others, by handle (a dict of its own once there is one)."""

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
            if self._loop is not None and self._callback is not None:
                watchers.insert(0, (self._loop, self._callback))
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
        self._watch_on(asyncio.get_running_loop(), callback)
        return id(callback)

    def _watch_on(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        """``watch`` on ``loop`` (the running one: a run reads it once for all its tokens).

        The lock taken and released by hand: a ``with`` block costs twice as much, and nothing
        between the two can raise but a ``MemoryError``, which ``finally`` still releases.
        """
        handle = id(callback)
        _LOCK.acquire()
        try:
            first = self._callback
            if (first is None or id(first) == handle) and handle not in self._watchers:
                self._loop, self._callback = loop, callback
            else:
                if not self._watchers:
                    self._watchers = {}
                self._watchers[handle] = (loop, callback)
        finally:
            _LOCK.release()

    def unwatch(self, handle: int) -> None:
        """Stop calling a callback registered with ``watch``."""
        _LOCK.acquire()  # (by hand, as in ``_watch_on``)
        try:
            first = self._callback
            if first is not None and id(first) == handle:
                self._loop = self._callback = None
            elif self._watchers:
                self._watchers.pop(handle, None)
                if not self._watchers:  # an emptied dict keeps its table: an idle session's 160 B
                    self._watchers = _NONE
        finally:
            _LOCK.release()

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
