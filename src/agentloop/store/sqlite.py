"""``SQLiteStore``: the embedded default store, on the standard library's ``sqlite3``.

One connection in WAL mode, shared by every thread that uses the store (a lock serialises it).
Writes are synchronous and small: a completed turn is one ``INSERT`` in one ``BEGIN IMMEDIATE``
transaction. ``synchronous=NORMAL`` (the default here) survives a crash of the process (every
committed transaction is in the WAL file); ``synchronous="FULL"`` also survives a power cut, at
an fsync per commit.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from agentloop.errors import ConfigurationError, MemoryBackendError
from agentloop.store._sql import Row, SQLStore, Transaction
from agentloop.store._tables import schema

__all__ = ["SQLiteStore"]

_SCHEMA = schema(seq="INTEGER PRIMARY KEY", real="REAL")

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


class _SQLiteTransaction:
    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(sql, params)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._conn.execute(sql, params).fetchall()


class _Begun:
    """One transaction: ``begin`` on entry, ``COMMIT`` on a clean exit, else ``ROLLBACK``."""

    __slots__ = ("_begin", "_conn", "_tx")

    def __init__(self, conn: sqlite3.Connection, tx: _SQLiteTransaction, begin: str) -> None:
        self._conn = conn
        self._tx = tx
        self._begin = begin

    def __enter__(self) -> Transaction:
        self._conn.execute(self._begin)
        return self._tx

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is None:
            try:
                self._conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
            return
        self._rollback()

    def _rollback(self) -> None:
        conn = self._conn
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")


class SQLiteStore(SQLStore):
    """A ``Store`` in one SQLite file (created with its tables when missing).

    Args:
        path: The database file (``":memory:"`` for a private in-memory database).
        synchronous: SQLite's ``synchronous`` pragma: ``"NORMAL"`` (default) is durable across
            a process crash, ``"FULL"`` across a power cut too.
        timeout: Seconds to wait for another process's write lock.
        read_only: Open an existing store to read it (``agentloop runs``): no table is
            created, no pragma set, every write fails; a database without our tables is a
            ``MemoryBackendError``.
    """

    name: ClassVar[str] = "SQLiteStore"
    schema = _SCHEMA

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "NORMAL",
        timeout: float = 5.0,
        read_only: bool = False,
    ) -> None:
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ConfigurationError(
                f"SQLiteStore synchronous must be one of {_SYNCHRONOUS}", field="synchronous"
            )
        super().__init__(driver_errors=(sqlite3.Error,))
        self.path = os.fspath(path)
        target = f"{Path(self.path).absolute().as_uri()}?mode=ro" if read_only else self.path
        try:
            self._conn = sqlite3.connect(
                target,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
                uri=read_only,
            )
        except sqlite3.Error as exc:
            raise MemoryBackendError(f"SQLiteStore: cannot open {self.path}: {exc}") from exc
        tx = _SQLiteTransaction(self._conn)
        self._write = _Begun(self._conn, tx, "BEGIN IMMEDIATE")  # one at a time: under the lock
        self._read = _Begun(self._conn, tx, "BEGIN")
        try:
            if read_only:  # a file that is not ours stays exactly as it was
                self._check_schema()
                return
            with self._guard(f"opening {self.path}"):
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
            self._create_schema()
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def _transaction(self, *, write: bool) -> AbstractContextManager[Transaction]:
        return self._write if write else self._read

    def _close_connection(self) -> None:
        self._conn.close()
