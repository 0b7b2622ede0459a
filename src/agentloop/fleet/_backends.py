"""Where a governor keeps its counts: the ``Backend`` protocol and the in-process one.

A backend answers four questions under one lock (a ``threading.Lock`` here, a transaction in
``_sql``): may this request go now (``admit``, which also queues the waiter FIFO per key), what
did it really cost (``settle``), close these keys for a while after a 429 (``close``), and
forget a waiter that gave up (``leave``). ``decide`` is the admission rule every backend
shares: a waiter goes only when it heads the queue of every key it needs and every line has
room; its ``Sent`` row is then written in the same critical section.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agentloop._util.slots import record
from agentloop.fleet._limits import RateLimit, Sent, guard, wait_for

__all__ = ["Ask", "Backend", "KeyView", "MemoryBackend", "Verdict", "decide"]

QUEUE_POLL = 0.05
"""Seconds a waiter behind another one waits before it looks again."""


@record
class Ask:
    """One limit a request counts against, and the tokens it is counted at there."""

    limit: RateLimit
    tokens: int


@record
class Verdict:
    """``lease`` when admitted; else the seconds to wait, the key and the line holding it back."""

    lease: str | None
    wait: float = 0.0
    key: str = ""
    limit: str = ""


@record
class KeyView:
    """What ``decide`` reads of one key: its rows, its closing, the waiter's place in line."""

    sent: Sequence[Sent]
    closed_until: float
    ahead: int
    """Waiters queued before this one (0: it heads the queue)."""


def decide(asks: Sequence[Ask], views: Mapping[str, KeyView], now: float) -> Verdict | None:
    """None when the request may go now, else the longest wait among its keys."""
    worst: Verdict | None = None
    for ask in asks:
        view = views[ask.limit.key]
        found = wait_for(ask.limit, now, view.sent, ask.tokens, view.closed_until, view.ahead)
        if found is None and view.ahead:
            found = (QUEUE_POLL, _binding(ask.limit))
        if found is not None and (worst is None or found[0] > worst.wait):
            worst = Verdict(None, found[0], ask.limit.key, found[1])
    return worst


def _binding(limit: RateLimit) -> str:
    """The line a waiter queued behind another one is said to wait for."""
    return "rpm" if limit.rpm else "tpm" if limit.tpm else "concurrent"


class Backend(Protocol):
    """The counts of a governor; every method is synchronous and atomic."""

    name: str
    """How errors name it (a DSN without its password)."""
    remote: bool
    """Whether its calls do I/O (they run in a worker thread then)."""

    def admit(self, asks: Sequence[Ask], waiter: str, lease: str, lease_seconds: float) -> Verdict:
        """Admit ``waiter``'s request as ``lease`` now, or say how long to wait (queued FIFO)."""
        ...

    def settle(self, lease: str, tokens: int | None) -> None:
        """The request ended: free its slot; ``tokens`` (if known) replaces its estimate."""
        ...

    def close(self, keys: Sequence[str], seconds: float) -> None:
        """A 429: no request to ``keys`` before ``seconds`` from now."""
        ...

    def leave(self, waiter: str) -> None:
        """``waiter`` gave up (cancelled, refused): take it out of every queue."""
        ...

    def dispose(self) -> None:
        """Release the connection (if any)."""
        ...


@dataclass
class _Key:
    sent: list[tuple[str, Sent]] = field(default_factory=list)
    closed_until: float = 0.0
    queue: list[str] = field(default_factory=list)


class MemoryBackend:
    """The counts of one process (``backend="memory"``), on the governor's clock."""

    name = "memory"
    remote = False

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._keys: dict[str, _Key] = {}
        self._lock = threading.Lock()

    def admit(self, asks: Sequence[Ask], waiter: str, lease: str, lease_seconds: float) -> Verdict:
        """See ``Backend.admit``."""
        with self._lock:
            now = self._clock()
            keys = [self._keys.setdefault(a.limit.key, _Key()) for a in asks]
            for ask, key in zip(asks, keys, strict=True):
                key.sent = [(i, s) for i, s in key.sent if _alive(s, now, ask.limit.window)]
                if waiter not in key.queue:
                    key.queue.append(waiter)
            views = {
                a.limit.key: KeyView([s for _, s in k.sent], k.closed_until, k.queue.index(waiter))
                for a, k in zip(asks, keys, strict=True)
            }
            verdict = decide(asks, views, now)
            if verdict is not None:
                return verdict
            for ask, key in zip(asks, keys, strict=True):
                until = now + lease_seconds if ask.limit.concurrent else None
                key.sent.append((lease, Sent(now, ask.tokens, until)))
                key.queue.remove(waiter)
            return Verdict(lease)

    def settle(self, lease: str, tokens: int | None) -> None:
        """See ``Backend.settle``."""
        with self._lock:
            for key in self._keys.values():
                key.sent = [(i, _settled(s, tokens) if i == lease else s) for i, s in key.sent]

    def close(self, keys: Sequence[str], seconds: float) -> None:
        """See ``Backend.close``."""
        with self._lock:
            until = self._clock() + seconds
            for name in keys:
                key = self._keys.setdefault(name, _Key())
                key.closed_until = max(key.closed_until, until)

    def leave(self, waiter: str) -> None:
        """See ``Backend.leave``."""
        with self._lock:
            for key in self._keys.values():
                if waiter in key.queue:
                    key.queue.remove(waiter)

    def dispose(self) -> None:
        """Nothing to release."""


def _settled(sent: Sent, tokens: int | None) -> Sent:
    """A row whose request ended: out of flight, at its reported tokens if known."""
    return Sent(sent.at, sent.tokens if tokens is None else tokens)


def _alive(sent: Sent, now: float, window: float) -> bool:
    """Whether a row still counts: in the window, or still in flight."""
    return sent.at > now - window - guard(window) or (
        sent.flight_until is not None and sent.flight_until > now
    )
