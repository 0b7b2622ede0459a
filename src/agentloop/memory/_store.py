"""The ``MemoryStore`` protocol and the base every backend shares: checks first, then storage.

LangGraph's ``BaseStore`` names, one key per item (SPEC 27). ``BaseMemoryStore`` checks every
argument (``agentloop.memory._item``) before its backend is asked anything, so bad input is one
``InvalidInput`` everywhere and nothing is written; a backend implements the underscored
primitives, each one transaction. ``apply`` is the capability's: a run's staged writes in one
transaction, the item limit enforced again inside it (SPEC 27, writes follow history).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.memory._item import (
    MemoryItem,
    Namespace,
    SearchFilter,
    check_filter,
    check_id,
    check_k,
    check_namespace,
    check_prefix,
    check_query,
    check_tags,
    check_text,
    from_timestamp,
    words,
)

__all__ = ["Applied", "BaseMemoryStore", "MemoryStore", "Write"]

T = TypeVar("T")
Row = tuple[str, str, tuple[str, ...]]
"""An item to write: id, text, tags."""


@dataclass(frozen=True, slots=True)
class Write:
    """One staged write: a put (``text`` set) or a delete (``text`` None) of item ``id``."""

    id: str
    text: str | None = None
    tags: tuple[str, ...] = ()
    created_at: float | None = None
    """A rename's kept creation time (epoch seconds); None: the item's own, or now."""


@dataclass(frozen=True, slots=True)
class Applied:
    """What an ``apply`` did: ids written, ids deleted, puts dropped by the item limit."""

    written: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()


@runtime_checkable
class MemoryStore(Protocol):
    """Where memories live, by namespace (async, as the core)."""

    async def put(
        self,
        namespace: Namespace,
        text: str,
        *,
        tags: Sequence[str] = (),
        id: str | None = None,
    ) -> MemoryItem:
        """Write one item (an existing ``id`` is replaced, keeping ``created_at``)."""
        ...

    async def put_many(
        self, namespace: Namespace, texts: Sequence[str], *, tags: Sequence[str] = ()
    ) -> list[MemoryItem]:
        """Write several items in one transaction."""
        ...

    async def get(self, namespace: Namespace, id: str) -> MemoryItem | None:
        """The item ``id`` of exactly ``namespace``, or None."""
        ...

    async def search(
        self,
        namespace: Namespace,
        query: str = "",
        *,
        k: int = 5,
        filter: dict[str, Any] | None = None,
    ) -> list[MemoryItem]:
        """Items of exactly ``namespace`` holding any query word, most relevant first."""
        ...

    async def delete(self, namespace: Namespace, id: str) -> bool:
        """Delete an item; False when there was none."""
        ...

    async def count(self, namespace: Namespace) -> int:
        """How many items ``namespace`` holds (never its children's)."""
        ...

    async def namespaces(self, prefix: Namespace = ()) -> list[Namespace]:
        """The namespaces holding items, under ``prefix`` (itself included), sorted."""
        ...

    async def aclose(self) -> None:
        """Release the store's connection."""
        ...


class BaseMemoryStore:
    """Checks, times and ids shared by the backends; they implement the ``_`` primitives."""

    def __init__(self) -> None:
        self._last = 0.0
        self._clock_lock = threading.Lock()

    # -- what a backend implements (each one transaction, epoch-second times) ----------------

    def _put(self, namespace: Namespace, rows: list[Row], now: float) -> None:
        raise NotImplementedError

    def _get(self, namespace: Namespace, item_id: str) -> MemoryItem | None:
        raise NotImplementedError

    def _search(
        self, namespace: Namespace, terms: list[str], k: int, found: SearchFilter
    ) -> list[MemoryItem]:
        raise NotImplementedError

    def _delete(self, namespace: Namespace, item_id: str) -> bool:
        raise NotImplementedError

    def _count(self, namespace: Namespace) -> int:
        raise NotImplementedError

    def _namespaces(self, prefix: Namespace) -> list[Namespace]:
        raise NotImplementedError

    def _apply(
        self, namespace: Namespace, writes: Sequence[Write], max_items: int | None, now: float
    ) -> Applied:
        raise NotImplementedError

    def _ids(self, namespace: Namespace) -> list[str]:
        raise NotImplementedError

    def _close(self) -> None:
        """Release the backend's connection."""

    async def _run(self, work: Callable[..., T], *args: Any) -> T:
        """Run one primitive (a backend on the network runs it off the event loop)."""
        return work(*args)

    # -- the public methods -----------------------------------------------------------------

    def _now(self) -> float:
        """Now, strictly after this store's last write (ties never hide which is newest)."""
        with self._clock_lock:
            now = max(time.time(), self._last + 1e-6)
            self._last = now
            return now

    async def put(
        self,
        namespace: Namespace,
        text: str,
        *,
        tags: Sequence[str] = (),
        id: str | None = None,
    ) -> MemoryItem:
        """Write one item; an existing ``id`` is replaced, keeping its ``created_at``."""
        ns, body, labels = check_namespace(namespace), check_text(text), check_tags(tags)
        item_id = new_id() if id is None else check_id(id)
        await self._run(self._put, ns, [(item_id, body, labels)], self._now())
        item = await self._run(self._get, ns, item_id)
        assert item is not None
        return item

    async def put_many(
        self, namespace: Namespace, texts: Sequence[str], *, tags: Sequence[str] = ()
    ) -> list[MemoryItem]:
        """Write several new items in one transaction (all or none)."""
        ns, labels = check_namespace(namespace), check_tags(tags)
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise InvalidInput(f"texts must be a list of strings, got {texts!r}")
        rows = [(new_id(), check_text(t), labels) for t in texts]
        now = self._now()
        await self._run(self._put, ns, rows, now)
        at = from_timestamp(now)
        return [MemoryItem(i, ns, t, labels, at, at) for i, t, _ in rows]

    async def get(self, namespace: Namespace, id: str) -> MemoryItem | None:
        """The item ``id`` of exactly ``namespace``, or None."""
        ns, item_id = check_namespace(namespace), check_id(id)
        return await self._run(self._get, ns, item_id)

    async def search(
        self,
        namespace: Namespace,
        query: str = "",
        *,
        k: int = 5,
        filter: dict[str, Any] | None = None,
    ) -> list[MemoryItem]:
        """Items of exactly ``namespace`` holding any word of ``query``; ``""``: the newest.

        More query words held rank above fewer, then the backend's relevance, then the newest.
        """
        ns, text, limit = check_namespace(namespace), check_query(query), check_k(k)
        found = check_filter(filter)
        terms = words(text)
        if text.strip() and not terms:
            return []  # punctuation only: no word to hold
        return await self._run(self._search, ns, terms, limit, found)

    async def delete(self, namespace: Namespace, id: str) -> bool:
        """Delete the item ``id``; False when the namespace holds none."""
        ns, item_id = check_namespace(namespace), check_id(id)
        return await self._run(self._delete, ns, item_id)

    async def count(self, namespace: Namespace) -> int:
        """How many items exactly ``namespace`` holds."""
        return await self._run(self._count, check_namespace(namespace))

    async def namespaces(self, prefix: Namespace = ()) -> list[Namespace]:
        """The namespaces holding items: ``prefix`` itself and those under it, sorted."""
        return await self._run(self._namespaces, check_prefix(prefix))

    async def ids(self, namespace: Namespace) -> list[str]:
        """Every id of exactly ``namespace``, sorted (a memory tool's directory listing)."""
        return await self._run(self._ids, check_namespace(namespace))

    async def apply(
        self, namespace: Namespace, writes: Iterable[Write], *, max_items: int | None = None
    ) -> Applied:
        """Apply a run's staged writes in one transaction (puts past ``max_items`` dropped)."""
        ns = check_namespace(namespace)
        return await self._run(self._apply, ns, list(writes), max_items, self._now())

    async def aclose(self) -> None:
        """Release the store's connection (idempotent)."""
        self._close()

    def _failed(self, what: str, exc: BaseException) -> MemoryBackendError:
        """A driver failure as ``MemoryBackendError`` (the cause chained by the caller)."""
        return MemoryBackendError(f"{type(self).__name__}: {what}: {type(exc).__name__}: {exc}")


def new_id() -> str:
    """A fresh item id."""
    import uuid

    return uuid.uuid4().hex


def joined(namespace: Namespace) -> str:
    """A namespace as one key: its parts never hold ``/``, so the join is unambiguous."""
    return "/".join(namespace)


def split(key: str) -> Namespace:
    """``joined``'s inverse."""
    return tuple(key.split("/"))


def plan(
    existing: dict[str, float], count: int, writes: Sequence[Write], max_items: int | None
) -> tuple[list[tuple[Write, float | None]], Applied]:
    """Which writes an ``apply`` makes, given the namespace's ids (with ``created_at``) and count.

    Returns the puts and deletes to make, in order (a put with its kept ``created_at``), and
    what they amount to. A put of a new id past ``max_items`` is dropped; deletes free room.
    """
    made: list[tuple[Write, float | None]] = []
    written: list[str] = []
    deleted: list[str] = []
    dropped: list[str] = []
    for write in writes:
        if write.text is None:
            if write.id in existing:
                del existing[write.id]
                count -= 1
                made.append((write, None))
                deleted.append(write.id)
            continue
        if write.id not in existing:
            if max_items is not None and count >= max_items:
                dropped.append(write.id)
                continue
            count += 1
            existing[write.id] = write.created_at or 0.0
        made.append((write, write.created_at or existing[write.id] or None))
        written.append(write.id)
    return made, Applied(tuple(written), tuple(deleted), tuple(dropped))
