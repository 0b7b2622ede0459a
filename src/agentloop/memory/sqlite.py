"""``SQLiteMemoryStore``: memories in a SQLite file, searched by FTS5.

Table ``agentloop_memory`` (one row per item, unique by namespace and id; a namespace is stored
as its parts joined by ``/``, which no part holds) beside an FTS5 table of each item's words
(``agentloop_memory_fts``, rowid = the item's ``seq``), both written in one transaction. The
indexed words are the query's words (``agentloop.memory._item.words``), so what a query matches
is the same on every backend. The file may be a ``SQLiteStore``'s: the tables are distinct.

A search with words ranks items by how many distinct query words they hold (one FTS lookup per
word), then ``bm25``, then the newest; without words it reads the newest through the
``(namespace, updated_at)`` index. A SQLite built without FTS5 is a ``ConfigurationError`` at
construction, never a slow scan.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agentloop.errors import ConfigurationError, MemoryBackendError
from agentloop.memory._item import MemoryItem, Namespace, SearchFilter, all_words, from_timestamp
from agentloop.memory._store import Applied, BaseMemoryStore, Row, Write, joined, plan, split

__all__ = ["SQLiteMemoryStore"]

_TABLES = (
    """CREATE TABLE IF NOT EXISTS agentloop_memory (
        seq INTEGER PRIMARY KEY,
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        text TEXT NOT NULL,
        tags TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        UNIQUE (namespace, id)
    )""",
    "CREATE INDEX IF NOT EXISTS agentloop_memory_newest "
    "ON agentloop_memory (namespace, updated_at)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS agentloop_memory_fts USING fts5("
    "words, tokenize = 'unicode61 remove_diacritics 0')",
)
_COLUMNS = "m.id, m.namespace, m.text, m.tags, m.created_at, m.updated_at"


def _item(row: Sequence[Any], score: float | None = None) -> MemoryItem:
    item_id, key, text, tags, created, updated = row[:6]
    return MemoryItem(
        item_id,
        split(key),
        text,
        tuple(json.loads(tags)),
        from_timestamp(created),
        from_timestamp(updated),
        score,
    )


def _phrase(word: str) -> str:
    """A word as an FTS5 string literal: never an operator, whatever it spells."""
    return '"' + word.replace('"', '""') + '"'


class SQLiteMemoryStore(BaseMemoryStore):
    """A ``MemoryStore`` in one SQLite file (created with its tables when missing).

    Args:
        path: The database file; it may be a ``SQLiteStore``'s (``":memory:"``: private).
        timeout: Seconds to wait for another connection's write lock.

    Raises:
        ConfigurationError: This SQLite has no FTS5.
        MemoryBackendError: The file cannot be opened.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 5.0) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise MemoryBackendError(f"SQLiteMemoryStore: cannot open {self.path}: {exc}") from exc
        try:
            self._create()
        except BaseException:
            self._conn.close()
            raise

    def __repr__(self) -> str:
        return f"SQLiteMemoryStore({self.path!r})"

    def _create(self) -> None:
        conn = self._conn
        try:
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            for statement in _TABLES:
                conn.execute(statement)
        except sqlite3.OperationalError as exc:
            if "fts5" in str(exc).lower():
                raise ConfigurationError(
                    f"SQLiteMemoryStore needs SQLite's FTS5 extension, which this SQLite "
                    f"({sqlite3.sqlite_version}) lacks: use a Python whose sqlite3 has it, or "
                    "PostgresMemoryStore",
                    field="path",
                ) from exc
            raise MemoryBackendError(f"SQLiteMemoryStore: cannot create tables: {exc}") from exc

    @contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise self._failed(what, exc) from exc

    @contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise self._failed(what, exc) from exc

    # -- writes ------------------------------------------------------------------------------

    def _write(
        self, conn: sqlite3.Connection, key: str, row: Row, now: float, kept: float | None
    ) -> None:
        item_id, text, tags = row
        found = conn.execute(
            "SELECT seq, created_at FROM agentloop_memory WHERE namespace = ? AND id = ?",
            (key, item_id),
        ).fetchone()
        created = kept or (found[1] if found else now)
        labels = json.dumps(list(tags))
        if found is None:
            seq = conn.execute(
                "INSERT INTO agentloop_memory (namespace, id, text, tags, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (key, item_id, text, labels, created, now),
            ).lastrowid
        else:
            seq = found[0]
            conn.execute(
                "UPDATE agentloop_memory SET text = ?, tags = ?, created_at = ?, updated_at = ? "
                "WHERE seq = ?",
                (text, labels, created, now, seq),
            )
            conn.execute("DELETE FROM agentloop_memory_fts WHERE rowid = ?", (seq,))
        conn.execute(
            "INSERT INTO agentloop_memory_fts (rowid, words) VALUES (?, ?)",
            (seq, " ".join(all_words(text))),
        )

    def _remove(self, conn: sqlite3.Connection, key: str, item_id: str) -> bool:
        found = conn.execute(
            "SELECT seq FROM agentloop_memory WHERE namespace = ? AND id = ?", (key, item_id)
        ).fetchone()
        if found is None:
            return False
        conn.execute("DELETE FROM agentloop_memory WHERE seq = ?", found)
        conn.execute("DELETE FROM agentloop_memory_fts WHERE rowid = ?", found)
        return True

    def _put(self, namespace: Namespace, rows: list[Row], now: float) -> None:
        key = joined(namespace)
        with self._transaction("put") as conn:
            for row in rows:
                self._write(conn, key, row, now, None)

    def _delete(self, namespace: Namespace, item_id: str) -> bool:
        with self._transaction("delete") as conn:
            return self._remove(conn, joined(namespace), item_id)

    def _apply(
        self, namespace: Namespace, writes: Sequence[Write], max_items: int | None, now: float
    ) -> Applied:
        key = joined(namespace)
        with self._transaction("apply") as conn:
            ids = sorted({w.id for w in writes})
            existing = dict(
                conn.execute(
                    "SELECT id, created_at FROM agentloop_memory WHERE namespace = ? AND id IN "
                    f"({', '.join('?' * len(ids))})",
                    (key, *ids),
                )
            )
            count = conn.execute(
                "SELECT count(*) FROM agentloop_memory WHERE namespace = ?", (key,)
            ).fetchone()[0]
            made, applied = plan(existing, count, writes, max_items)
            for write, kept in made:
                if write.text is None:
                    self._remove(conn, key, write.id)
                else:
                    self._write(conn, key, (write.id, write.text, write.tags), now, kept)
            return applied

    # -- reads -------------------------------------------------------------------------------

    def _get(self, namespace: Namespace, item_id: str) -> MemoryItem | None:
        with self._reading("get") as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM agentloop_memory m WHERE m.namespace = ? AND m.id = ?",
                (joined(namespace), item_id),
            ).fetchone()
        return None if row is None else _item(row)

    def _search(
        self, namespace: Namespace, terms: list[str], k: int, found: SearchFilter
    ) -> list[MemoryItem]:
        where, params = _filtered(found)
        key = joined(namespace)
        if not terms:
            sql = (
                f"SELECT {_COLUMNS} FROM agentloop_memory m WHERE m.namespace = ?{where} "
                "ORDER BY m.updated_at DESC, m.seq DESC LIMIT ?"
            )
            with self._reading("search") as conn:
                return [_item(r) for r in conn.execute(sql, (key, *params, k))]
        held = " + ".join(
            "(m.seq IN (SELECT rowid FROM agentloop_memory_fts WHERE agentloop_memory_fts "
            "MATCH ?))"
            for _ in terms
        ) if len(terms) > 1 else "1"  # fmt: skip
        sql = (
            f"SELECT {_COLUMNS}, -bm25(agentloop_memory_fts) AS score, {held} AS held "
            "FROM agentloop_memory_fts "
            "JOIN agentloop_memory m ON m.seq = agentloop_memory_fts.rowid "
            f"WHERE agentloop_memory_fts MATCH ? AND m.namespace = ?{where} "
            "ORDER BY held DESC, score DESC, m.updated_at DESC, m.seq DESC LIMIT ?"
        )
        each = [_phrase(t) for t in terms] if len(terms) > 1 else []
        values = (*each, " OR ".join(_phrase(t) for t in terms), key, *params, k)
        with self._reading("search") as conn:
            return [_item(r, r[6]) for r in conn.execute(sql, values)]

    def _count(self, namespace: Namespace) -> int:
        with self._reading("count") as conn:
            row = conn.execute(
                "SELECT count(*) FROM agentloop_memory WHERE namespace = ?", (joined(namespace),)
            ).fetchone()
        return int(row[0])

    def _ids(self, namespace: Namespace) -> list[str]:
        with self._reading("ids") as conn:
            rows = conn.execute(
                "SELECT id FROM agentloop_memory WHERE namespace = ? ORDER BY id",
                (joined(namespace),),
            )
            return [r[0] for r in rows]

    def _namespaces(self, prefix: Namespace) -> list[Namespace]:
        sql = "SELECT DISTINCT namespace FROM agentloop_memory"
        params: tuple[Any, ...] = ()
        if prefix:
            key = joined(prefix)
            sql += " WHERE namespace = ? OR substr(namespace, 1, ?) = ?"
            params = (key, len(key) + 1, key + "/")
        with self._reading("namespaces") as conn:
            return sorted(split(r[0]) for r in conn.execute(sql, params))

    def _close(self) -> None:
        with self._lock:
            self._conn.close()


def _filtered(found: SearchFilter) -> tuple[str, list[Any]]:
    """The SQL conditions of a filter and their parameters."""
    where, params = "", list[Any]()
    for tag in found.tags:
        where += " AND EXISTS (SELECT 1 FROM json_each(m.tags) WHERE json_each.value = ?)"
        params.append(tag)
    if found.updated_after is not None:
        where += " AND m.updated_at > ?"
        params.append(found.updated_after.timestamp())
    return where, params
