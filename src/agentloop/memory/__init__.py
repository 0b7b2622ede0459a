"""Long-term memory (SPEC 27): what a model keeps across conversations, under the app's key.

Stores (async, LangGraph's ``BaseStore`` method names, one key per item):
``InMemoryMemoryStore()``, ``SQLiteMemoryStore(path)`` (FTS5; may share a ``SQLiteStore``'s
file) and ``PostgresMemoryStore(dsn)`` (the ``postgres`` extra; full-text search under a GIN
index). A namespace is a tuple of strings; ``search`` and ``get`` see exactly that namespace,
never a prefix's children; a query is plain words, never index syntax.

The capability: ``Agent(..., memory=Memory(store, namespace=lambda ctx: ("user", ctx.deps.id)))``
gives the model ``remember``/``recall``/``forget`` (Anthropic's memory tool on Claude), over the
one namespace the application's callable names for the run; the model never names one. A run's
writes are staged and applied at finalize for exactly the turns its history commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloop._util.lazy import lazy_exports
from agentloop.memory._item import MemoryItem, Namespace
from agentloop.memory._store import MemoryStore

if TYPE_CHECKING:
    from agentloop.memory._capability import Memory, by_session
    from agentloop.memory.inmemory import InMemoryMemoryStore
    from agentloop.memory.postgres import PostgresMemoryStore
    from agentloop.memory.sqlite import SQLiteMemoryStore

__all__ = [
    "InMemoryMemoryStore",
    "Memory",
    "MemoryItem",
    "MemoryStore",
    "Namespace",
    "PostgresMemoryStore",
    "SQLiteMemoryStore",
    "by_session",
]

_LAZY = {
    "InMemoryMemoryStore": "agentloop.memory.inmemory",
    "Memory": "agentloop.memory._capability",
    "PostgresMemoryStore": "agentloop.memory.postgres",
    "SQLiteMemoryStore": "agentloop.memory.sqlite",
    "by_session": "agentloop.memory._capability",
}
if not TYPE_CHECKING:  # mypy sees the imports above, and no other name
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
