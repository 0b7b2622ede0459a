"""One run's view of memory: its namespace, its staged writes, what it recalled and committed.

A run never writes to the store while it runs (SPEC 27, writes follow history): each write of a
memory tool is staged here with the turn that made it, and the run's own reads see the staged
writes over the store. At finalize the engine applies exactly the writes of the turns the
history commits (``commit``), in one transaction. Everything here lives in ``run.memory`` (a
plain dict, so the run record carries it through the store, a pause and the durable journal):
``namespace``, ``recalled`` (ids), ``block`` (the recall text), ``staged`` (the writes, each with
its ``turn``) and, once applied, ``committed`` (``written``, ``deleted``, ``dropped``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

from agentloop.memory._item import MemoryItem, Namespace, words
from agentloop.memory._store import Applied, BaseMemoryStore, Write

__all__ = ["Limits", "MemoryRun"]


class Limits(Protocol):
    """What a memory tool reads of its ``Memory``: the limits and each run's state."""

    max_item_chars: int
    max_items: int
    runs: dict[str, MemoryRun]


class MemoryRun:
    """The memory state of one run, over ``run.memory`` (``record``)."""

    def __init__(
        self,
        store: BaseMemoryStore,
        record: dict[str, Any],
        journal: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.store = store
        self.record = record
        self.journal = journal
        """Writes the record to the durable journal after each staged write (a durable store)."""
        self.namespace: Namespace = tuple(record["namespace"])
        record.setdefault("staged", [])
        self._known: dict[str, bool] = {}
        """Whether the store held an id before this run (asked once per id)."""

    @property
    def staged(self) -> list[dict[str, Any]]:
        """The staged writes, oldest first: ``{"turn", "id", "text"?, "tags"?, "created_at"?}``."""
        staged: list[dict[str, Any]] = self.record["staged"]
        return staged

    def stage(self, turn: int, write: Write) -> None:
        """Stage a write made in ``turn``."""
        entry: dict[str, Any] = {"turn": turn, "id": write.id}
        if write.text is not None:
            entry["text"] = write.text
            entry["tags"] = list(write.tags)
        if write.created_at is not None:
            entry["created_at"] = write.created_at
        self.staged.append(entry)
        if self.journal is not None:
            self.journal(self.record)

    def _latest(self) -> dict[str, dict[str, Any]]:
        """The last staged write of each id."""
        return {e["id"]: e for e in self.staged}

    async def _existed(self, item_id: str) -> bool:
        known = self._known.get(item_id)
        if known is None:
            known = self._known[item_id] = await self.store.get(self.namespace, item_id) is not None
        return known

    async def get(self, item_id: str) -> MemoryItem | None:
        """The item as this run sees it: its staged writes over the store."""
        entry = self._latest().get(item_id)
        if entry is None:
            return await self.store.get(self.namespace, item_id)
        if "text" not in entry:
            return None
        old = await self.store.get(self.namespace, item_id)
        now = datetime.now(UTC)
        created = old.created_at if old is not None else now
        if "created_at" in entry:
            created = datetime.fromtimestamp(entry["created_at"], UTC)
        return MemoryItem(
            item_id, self.namespace, entry["text"], tuple(entry["tags"]), created, now
        )

    async def search(self, query: str, k: int) -> list[MemoryItem]:
        """Items holding a query word (``""``: the newest), the staged ones first."""
        latest = self._latest()
        found = await self.store.search(self.namespace, query, k=min(100, k + len(latest)))
        hits = [i for i in found if i.id not in latest]
        terms = set(words(query))
        staged: list[tuple[int, int, MemoryItem]] = []
        for n, entry in enumerate(latest.values()):
            if "text" not in entry:
                continue
            held = len(terms.intersection(words(entry["text"]))) if terms else 0
            if terms and not held:
                continue
            item = await self.get(entry["id"])
            if item is not None:
                staged.append((held, n, replace(item, score=float(held) if terms else None)))
        staged.sort(key=lambda s: (s[0], s[1]), reverse=True)
        return ([s[2] for s in staged] + hits)[:k]

    async def count(self) -> int:
        """How many items the namespace would hold with the staged writes applied."""
        total = await self.store.count(self.namespace)
        for item_id, entry in self._latest().items():
            existed = await self._existed(item_id)
            if "text" in entry and not existed:
                total += 1
            elif "text" not in entry and existed:
                total -= 1
        return total

    async def ids(self) -> list[str]:
        """Every id the namespace would hold (for a directory listing), staged writes applied."""
        latest = self._latest()
        stored = await self._all_ids()
        kept = [i for i in stored if i not in latest]
        kept += [i for i, e in latest.items() if "text" in e]
        return sorted(set(kept))

    async def _all_ids(self) -> list[str]:
        return await self.store.ids(self.namespace)

    def writes(self, before_turn: int | None) -> list[Write]:
        """The staged writes of turns before ``before_turn`` (None: all), oldest first."""
        return [
            Write(e["id"], e.get("text"), tuple(e.get("tags", ())), e.get("created_at"))
            for e in self.staged
            if before_turn is None or e["turn"] < before_turn
        ]

    def keep_only(self, turns: Iterable[int]) -> None:
        """Keep staged only the writes of ``turns`` (a paused turn's, applied later)."""
        keep = set(turns)
        self.record["staged"] = [e for e in self.staged if e["turn"] in keep]

    async def commit(self, before_turn: int | None, max_items: int) -> Applied:
        """Apply the staged writes of turns before ``before_turn`` (None: all), in one go."""
        writes = self.writes(before_turn)
        if not writes:
            applied = Applied()
        else:
            applied = await self.store.apply(self.namespace, writes, max_items=max_items)
        committed = self.record.setdefault(
            "committed", {"written": [], "deleted": [], "dropped": []}
        )
        committed["written"] += list(applied.written)
        committed["deleted"] += list(applied.deleted)
        committed["dropped"] += list(applied.dropped)
        return applied
