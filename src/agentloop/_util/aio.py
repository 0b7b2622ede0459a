"""Closing things, written once: an async iterator left mid-way, and ``with``/``async with``.

``aclose_iterator`` awaits ``aclose()`` on an async iterator when it has one: an async generator
left before its end keeps its ``finally`` blocks (and the connection or lock they release) pending
until it is closed, while a plain iterator object may have nothing to close. Errors raised by the
close propagate; nothing is swallowed.

``AsyncClosing`` and ``Closing`` serve the common case where leaving the block means calling
``aclose()`` / ``close()``. They are protocols with default methods: a class that subclasses one
writes only its close method (mypy insists on it) and gets ``__aenter__``/``__aexit__`` (or
``__enter__``/``__exit__``); a protocol that extends one (``model.ClosableModelClient``) says "an
async context manager that closes" without declaring the dunders again. Put them before
``Generic[...]`` in the bases. A class whose exit does more than close (a stream that cancels its
run, a screen that keeps a partial reply) writes its own, as ``__exit__(self, *exc_info: object)``
when it does not look at the exception.

This module imports nothing of ours, so every layer may use it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Protocol, Self

__all__ = ["AsyncClosing", "Closing", "aclose_iterator"]


async def aclose_iterator(iterator: AsyncIterator[Any]) -> None:
    """Await ``iterator.aclose()`` if the iterator has one (async generators do)."""
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


class AsyncClosing(Protocol):
    """``async with obj:`` yields ``obj`` and awaits ``obj.aclose()`` on the way out."""

    async def aclose(self) -> None:
        """Release what the object holds (each class writes its own)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Closing(Protocol):
    """``with obj:`` yields ``obj`` and calls ``obj.close()`` on the way out."""

    def close(self) -> None:
        """Release what the object holds (each class writes its own)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
