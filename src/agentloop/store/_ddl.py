"""Creating tables once per version, beside processes that already use them: one helper.

The store (``SQLStore``), the rate governor's shared backends (``fleet._sql``) and the
PostgreSQL memory store (``memory.postgres``) keep tables in a database many processes open at
once. ``CREATE ... IF NOT EXISTS`` is no free
check on PostgreSQL: ``CREATE INDEX`` takes a SHARE lock on its table even when the index is
there, so an open waits behind every running write transaction on that table (and deadlocks
with one that waits on it in turn); and two processes creating one table at the same moment race
on the catalog (a unique violation). So ``ensure_schema`` first reads the schema's version row
(a plain read, no lock on the tables): when it is current, no DDL runs at all. Only a missing or
older version takes the one transaction-scoped advisory lock of agentloop's DDL
(``pg_advisory_xact_lock``), reads the version again (another process may have just created
the tables) and runs the DDL and the new version row in that same transaction. On SQLite the
write transaction (``BEGIN IMMEDIATE``) already serialises the writers.

Versions live in ``agentloop_meta(key, value)``, one key per schema (the store's
``schema_version``, the governor's ``rate_schema_version``, the memory store's
``memory_schema_version``); a newer version than this
agentloop knows is refused, nothing changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentloop.errors import MemoryBackendError

__all__ = ["DDL_LOCK", "ensure_schema"]

DDL_LOCK = 0x6167656E746C6F6F
"""The advisory lock key every agentloop DDL on PostgreSQL holds (b"agentloo" as an int64)."""
_META = "CREATE TABLE IF NOT EXISTS agentloop_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
_READ = "SELECT value FROM agentloop_meta WHERE key = ?"
_WRITE = (
    "INSERT INTO agentloop_meta VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


def ensure_schema(
    store: Any,
    *,
    key: str,
    version: int,
    statements: Sequence[str],
    postgres: bool,
    what: str,
    upgrade: Callable[[Any], None] | None = None,
) -> None:
    """Create ``statements``' tables unless ``key`` already records ``version`` (module).

    ``store`` is an ``SQLStore`` (typed loosely: ``_sql`` calls this, so this cannot import it).
    ``upgrade(tx)`` runs after the statements, in their transaction (data an older layout
    needs rewritten: the store's status columns, ``_status.backfill``).

    Raises:
        MemoryBackendError: The database holds a newer version, or cannot be read or written.
    """
    if _current(store, key, version, what):
        return
    with store._open(f"creating {what}", write=True) as tx:
        if postgres:
            tx.rows("SELECT pg_advisory_xact_lock(?)", (DDL_LOCK,))
        tx.run(_META)
        if _check(store, tx, key, version, what):
            return
        for statement in statements:
            tx.run(statement)
        if upgrade is not None:
            upgrade(tx)
        tx.run(_WRITE, (key, str(version)))


def _current(store: Any, key: str, version: int, what: str) -> bool:
    """Whether ``version`` is recorded already (a missing table or row: not yet)."""
    try:
        with store._open(f"reading the version of {what}", write=False) as tx:
            return _check(store, tx, key, version, what)
    except MemoryBackendError as error:
        if "newer than" in error.message:
            raise
        return False


def _check(store: Any, tx: Any, key: str, version: int, what: str) -> bool:
    rows = tx.rows(_READ, (key,))
    found = int(rows[0][0]) if rows else None
    if found is not None and found > version:
        raise MemoryBackendError(
            f"{store.name}: {what}: written with schema version {found}, newer than this "
            f"agentloop's {version}; upgrade agentloop to open it"
        )
    return found == version
