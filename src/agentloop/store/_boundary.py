"""A store's one error boundary, and the transaction every store call runs in.

Foreign exceptions (the driver's, and a stored record that no longer parses: ``ValueError``,
``KeyError``, ``TypeError``) become ``MemoryBackendError`` here, with ``raise ... from exc``;
a ``MemoryBackendError`` and anything else (a ``KeyboardInterrupt``) pass through as they are.

``Opened`` is ``SQLStore._open``: the store's lock, this boundary and the backend's transaction
in one object, not three nested generator context managers, which cost about 35,000
instructions a call: as much as the SQLite commit it wraps, three or four times a turn.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from agentloop.errors import MemoryBackendError
from agentloop.store._rows import describe

if TYPE_CHECKING:
    import threading
    from contextlib import AbstractContextManager

    from agentloop.store._transaction import Transaction

__all__ = ["Guarded", "Opened", "failure"]


class Guarded(Protocol):
    """What the boundary needs of a store."""

    @property
    def name(self) -> str:
        """The store's class name, for messages."""
        ...

    _closed: bool
    _driver_errors: tuple[type[BaseException], ...]
    _lock: threading.Lock

    def _transaction(self, *, write: bool) -> AbstractContextManager[Transaction]: ...


def failure(store: Guarded, what: str, exc: BaseException) -> MemoryBackendError | None:
    """The ``MemoryBackendError`` that ``exc`` becomes (None: it passes through as it is)."""
    if isinstance(exc, MemoryBackendError):
        return None
    if isinstance(exc, store._driver_errors):
        return MemoryBackendError(f"{store.name}: {what} failed: {describe(exc)}")
    if isinstance(exc, ValueError | KeyError | TypeError):
        return MemoryBackendError(
            f"{store.name}: {what}: a stored record is unreadable: {describe(exc)}"
        )
    return None


class Opened:
    """One transaction under the store's lock, behind the one error boundary."""

    __slots__ = ("_inner", "_store", "_what", "_write")

    def __init__(self, store: Guarded, what: str, write: bool) -> None:
        self._store = store
        self._what = what
        self._write = write
        self._inner: Any = None

    def __enter__(self) -> Transaction:
        store = self._store
        store._lock.acquire()
        try:
            if store._closed:
                raise MemoryBackendError(f"{store.name}: {self._what}: the store is closed")
            self._inner = store._transaction(write=self._write)
            tx: Transaction = self._inner.__enter__()
        except BaseException as exc:
            store._lock.release()
            found = failure(store, self._what, exc)
            if found is None:
                raise
            raise found from exc
        return tx

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        store = self._store
        try:
            try:
                ended: bool = bool(self._inner.__exit__(kind, error, traceback))  # commit
            except BaseException as exc:
                found = failure(store, self._what, exc)
                if found is None:
                    raise
                raise found from exc
            if error is not None and not ended:
                found = failure(store, self._what, error)
                if found is not None:
                    raise found from error
            return ended
        finally:
            store._lock.release()
