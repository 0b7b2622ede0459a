"""One closable resource per event loop, opened lazily and closed before that loop ends.

aiohttp binds a session (its connector, timers and futures) to the loop that created it, so an
``HttpTransport`` keeps one per loop: two ``asyncio.run`` calls, or ``run_sync`` twice, each get
their own. ``PerLoop`` holds them; it knows only that a resource has ``closed`` and an async
``close()``, so this module needs no aiohttp.

Each resource is guarded by an async generator first iterated on the resource's loop, so the
loop tracks it: ``shutdown_asyncgens()``, which ``asyncio.run`` and ``asyncio.Runner.close``
await before closing the loop, finishes it and so closes the resource while the loop can still
close its sockets (no "Unclosed client session", no "Unclosed connector"). A resource dropped
while its loop runs (its owner was garbage collected) is closed on that loop the same way, by
asyncio's async-generator finalizer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["PerLoop"]

_log = logging.getLogger(__name__)


class Closable(Protocol):
    """What ``PerLoop`` needs of a resource (an ``aiohttp.ClientSession`` has both)."""

    @property
    def closed(self) -> bool:
        """Whether the resource is closed."""
        ...

    async def close(self) -> None:
        """Close the resource."""
        ...


R = TypeVar("R", bound=Closable)


class _Guarded(Generic[R]):
    """One loop's resource and the async generator that closes it at that loop's shutdown."""

    def __init__(self, resource: R) -> None:
        self.resource = resource
        self._guardian = _close_at_loop_shutdown(resource)

    async def start(self) -> None:
        """Register the guardian with the running loop (its first iteration does)."""
        await anext(self._guardian)

    async def aclose(self) -> None:
        """Close the resource now, on its own (running) loop."""
        await self._guardian.aclose()

    def close_after_loop(self) -> None:
        """Finish a resource whose loop has closed, without running that loop.

        After ``asyncio.run`` the guardian has already closed it and this does nothing. A loop
        closed without ``shutdown_asyncgens()`` left it open: aiohttp closes the connector of a
        closed loop by marking it closed and forgetting its connections, without awaiting
        anything, so the close coroutine finishes at its first step and is driven here by hand.
        """
        closing = self._guardian.aclose()
        try:
            closing.send(None)
        except StopIteration:
            return
        except Exception:  # best effort: a dead loop's leftovers must not fail a new request
            _log.debug("closing a session of a closed event loop failed", exc_info=True)
            return
        closing.close()


async def _close_at_loop_shutdown(resource: Closable) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await resource.close()


class PerLoop(Generic[R]):
    """The running loop's resource, made by ``factory`` on first use on that loop."""

    def __init__(self, factory: Callable[[], R]) -> None:
        """Keep ``factory``; nothing is made until ``get``."""
        self._factory = factory
        self._by_loop: dict[asyncio.AbstractEventLoop, _Guarded[R]] = {}

    def ready(self) -> R | None:
        """The running loop's resource when it is open and the only one, else None (``get``).

        The common case without a coroutine to create and await.
        """
        current = self._by_loop.get(asyncio.get_running_loop())
        if current is not None and len(self._by_loop) == 1 and not current.resource.closed:
            return current.resource
        return None

    async def get(self) -> R:
        """The running loop's resource, made (again, if it was closed) when needed."""
        loop = asyncio.get_running_loop()
        current = self._by_loop.get(loop)
        if current is not None and len(self._by_loop) == 1 and not current.resource.closed:
            return current.resource  # the common case: one loop, its resource open
        self._drop_dead()
        current = self._by_loop.get(loop)
        if current is None or current.resource.closed:
            current = _Guarded(self._factory())
            self._by_loop[loop] = current
            await current.start()
        return current.resource

    def _drop_dead(self) -> None:
        """Forget the resources of loops that have closed, closing any still open."""
        for loop in list(self._by_loop):  # a copy: loops in other threads add theirs
            dead = self._by_loop.pop(loop, None) if loop.is_closed() else None
            if dead is not None:  # None too when another thread dropped it first
                dead.close_after_loop()

    async def aclose(self) -> None:
        """Close the running loop's resource (idempotent); the next ``get`` makes a new one.

        A resource of another loop that is still open closes when that loop shuts down (or by
        ``aclose`` awaited on it).
        """
        self._drop_dead()
        current = self._by_loop.pop(asyncio.get_running_loop(), None)
        if current is not None:
            await current.aclose()
