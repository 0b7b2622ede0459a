"""``InMemoryMemoryStore``: memories in a dict, for tests and for one process that may forget.

The same contract as the database backends (one shared test suite). Relevance: the number of
distinct query words an item holds, then how much of the item they make up (a term frequency
in 0..1), then the newest. Every method holds one lock, so a write is all or nothing.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agentloop.memory._item import MemoryItem, Namespace, SearchFilter, all_words, from_timestamp
from agentloop.memory._store import Applied, BaseMemoryStore, Row, Write, plan

__all__ = ["InMemoryMemoryStore"]


@dataclass(slots=True)
class _Entry:
    item: MemoryItem
    words: Counter[str]
    size: int
    seq: int


class InMemoryMemoryStore(BaseMemoryStore):
    """A ``MemoryStore`` in this process's memory (gone when it ends)."""

    def __init__(self) -> None:
        super().__init__()
        self._spaces: dict[Namespace, dict[str, _Entry]] = {}
        self._lock = threading.Lock()
        self._seq = 0

    def __repr__(self) -> str:
        return f"InMemoryMemoryStore({sum(len(s) for s in self._spaces.values())} items)"

    def _write(
        self, space: dict[str, _Entry], ns: Namespace, row: Row, now: float, kept: float | None
    ) -> None:
        item_id, text, tags = row
        old = space.get(item_id)
        at = from_timestamp(now)
        created = from_timestamp(kept) if kept else (old.item.created_at if old else at)
        self._seq += 1
        item = MemoryItem(item_id, ns, text, tags, created, at)
        found = all_words(text)
        space[item_id] = _Entry(item, Counter(found), max(1, len(found)), self._seq)

    def _put(self, namespace: Namespace, rows: list[Row], now: float) -> None:
        with self._lock:
            space = self._spaces.setdefault(namespace, {})
            for row in rows:
                self._write(space, namespace, row, now, None)

    def _get(self, namespace: Namespace, item_id: str) -> MemoryItem | None:
        with self._lock:
            entry = self._spaces.get(namespace, {}).get(item_id)
            return None if entry is None else entry.item

    def _search(
        self, namespace: Namespace, terms: list[str], k: int, found: SearchFilter
    ) -> list[MemoryItem]:
        with self._lock:
            entries = list(self._spaces.get(namespace, {}).values())
        wanted = set(found.tags)
        scored: list[tuple[tuple[float, float, float, int], MemoryItem]] = []
        for entry in entries:
            item = entry.item
            if wanted and not wanted.issubset(item.tags):
                continue
            if found.updated_after is not None and item.updated_at <= found.updated_after:
                continue
            if not terms:
                scored.append(((0, 0, item.updated_at.timestamp(), entry.seq), item))
                continue
            held = [w for w in terms if w in entry.words]
            if not held:
                continue
            frequency = sum(entry.words[w] for w in held) / entry.size
            key = (len(held), frequency, item.updated_at.timestamp(), entry.seq)
            scored.append((key, replace(item, score=len(held) + frequency)))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        return [item for _, item in scored[:k]]

    def _delete(self, namespace: Namespace, item_id: str) -> bool:
        with self._lock:
            space = self._spaces.get(namespace)
            if space is None or item_id not in space:
                return False
            del space[item_id]
            if not space:
                del self._spaces[namespace]
            return True

    def _count(self, namespace: Namespace) -> int:
        with self._lock:
            return len(self._spaces.get(namespace, {}))

    def _ids(self, namespace: Namespace) -> list[str]:
        with self._lock:
            return sorted(self._spaces.get(namespace, {}))

    def _namespaces(self, prefix: Namespace) -> list[Namespace]:
        with self._lock:
            found = [
                ns for ns, space in self._spaces.items() if space and ns[: len(prefix)] == prefix
            ]
        return sorted(found)

    def _apply(
        self, namespace: Namespace, writes: Sequence[Write], max_items: int | None, now: float
    ) -> Applied:
        with self._lock:
            space = self._spaces.setdefault(namespace, {})
            existing = {i: e.item.created_at.timestamp() for i, e in space.items()}
            made, applied = plan(existing, len(space), writes, max_items)
            for write, kept in made:
                if write.text is None:
                    space.pop(write.id, None)
                else:
                    self._write(space, namespace, (write.id, write.text, write.tags), now, kept)
            if not space:
                del self._spaces[namespace]
            return applied
