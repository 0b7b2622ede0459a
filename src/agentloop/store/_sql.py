"""The SQL both stores share: one schema, one set of statements, one error boundary.

``SQLStore`` implements the ``Store`` protocol over a tiny ``Transaction`` interface (run a
statement, run it for many rows, fetch rows) that each backend provides for its driver, on the
tables ``_tables`` declares (one row per message of history, per run, per turn in flight; the
safety state, step journal and lease of each session).

Foreign exceptions (the driver's, and a stored record that no longer parses) become
``MemoryBackendError`` at the one boundary (``_boundary``), with ``raise ... from exc``. Reads check
every row they rebuild: a damaged one (a record that is not a run, a malformed ``usage``, a
history row that is not a message, a column of the wrong type) is a ``MemoryBackendError`` that
names the run (or session) and the field. ``scan_runs`` reads each run on its own, so one
damaged record does not hide the readable ones (``agentloop runs`` lists those).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar

from agentloop._util.aio import Closing
from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.messages import Message, input_text
from agentloop.run import Run, Turn, message_from_dict
from agentloop.store._boundary import Opened, failure
from agentloop.store._durable import DurableSQL
from agentloop.store._encoded import RunTexts, message_texts, record_json
from agentloop.store._listing import (
    Found,
    RunPage,
    read_runs,
    runs_during,
    runs_page,
    runs_starting,
    where_runs,
)
from agentloop.store._rows import (
    StoredRun,
    json_column,
    text_column,
)
from agentloop.store._status import checked, columns, upgrade
from agentloop.store._tables import RUN_COLUMNS, SCHEMA_VERSION
from agentloop.store._transaction import Row, Transaction
from agentloop.store._writes import release_lease, write_history, write_safety

__all__ = ["Row", "SQLStore", "StoredRun", "Transaction"]

_STATUS = "status, batch_id, request_id"


class SQLStore(DurableSQL, Closing):
    """``Store`` over SQL; a subclass supplies the connection, the DDL and ``_transaction``."""

    name: ClassVar[str] = "store"
    schema: ClassVar[tuple[str, ...]] = ()
    postgres: ClassVar[bool] = False
    """Whether the database is PostgreSQL (its DDL takes the advisory lock, ``_ddl``)."""

    def __init__(self, *, driver_errors: tuple[type[BaseException], ...]) -> None:
        self._driver_errors = driver_errors
        self._lock = threading.Lock()
        self._closed = False
        self._texts: dict[str, RunTexts] = {}
        """The JSON of each run in flight's turn rows, for its finalize (``_encoded``)."""
        self._in_flight: dict[str, str] = {}
        """The run each session started last and has not finalized."""

    # -- what a backend provides -----------------------------------------------------------

    def _transaction(self, *, write: bool) -> AbstractContextManager[Transaction]:
        raise NotImplementedError

    def _close_connection(self) -> None:
        raise NotImplementedError

    # -- plumbing --------------------------------------------------------------------------

    def _open(self, what: str, *, write: bool) -> AbstractContextManager[Transaction]:
        """One transaction under the lock, behind the one error boundary (``_boundary``)."""
        return Opened(self, what, write)

    def transaction(self, what: str) -> AbstractContextManager[Transaction]:
        """One write transaction on this store's connection, for a neighbour's own tables.

        The rate governor (SPEC 25) keeps its counts beside the runs this way; failures are
        ``MemoryBackendError`` naming ``what``.
        """
        return self._open(what, write=True)

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        if self._closed:
            raise MemoryBackendError(f"{self.name}: {what}: the store is closed")
        try:
            yield
        except BaseException as exc:
            found = failure(self, what, exc)
            if found is None:
                raise
            raise found from exc

    def _create_schema(self) -> None:
        """Create missing tables; upgrade an older layout; refuse a newer one (``_ddl``).

        An open of a store whose version is current runs no DDL (nothing waits behind the
        transactions of the processes already using it).
        """
        from functools import partial

        from agentloop.store._ddl import ensure_schema

        ensure_schema(
            self,
            key="schema_version",
            version=SCHEMA_VERSION,
            statements=self.schema,
            postgres=self.postgres,
            what="the store",
            upgrade=partial(upgrade, postgres=self.postgres),
        )

    def _check_schema(self) -> None:
        """A read-only open: the database must hold our runs table; nothing is created or set.

        A store of an older layout (no ``status`` column) is refused, naming the writing open
        that upgrades it in place.
        """
        try:
            with self._open("reading the store's tables", write=False) as tx:
                tx.rows("SELECT run_id FROM agentloop_runs WHERE 1 = 0")
        except MemoryBackendError as exc:
            raise MemoryBackendError(
                f"{self.name}: not an agentloop store (no agentloop_runs table), or not "
                f"readable: {exc.message}"
            ) from exc
        try:
            with self._open("reading the store's layout", write=False) as tx:
                tx.rows("SELECT status FROM agentloop_runs WHERE 1 = 0")
        except MemoryBackendError as exc:
            raise MemoryBackendError(
                f"{self.name}: the store was written by an older agentloop (before schema "
                f"{SCHEMA_VERSION}); open it once for writing ({self.name}(...) without "
                "read_only, e.g. by any agent run or 'agentloop batch poll') to upgrade it in place"
            ) from exc

    def close(self) -> None:
        """Release the connection (idempotent)."""
        self._texts.clear()
        self._in_flight.clear()
        with self._lock:
            if not self._closed:
                self._closed = True
                self._close_connection()

    # -- writes ----------------------------------------------------------------------------

    def begin_run(
        self, session_id: str, run: Run, *, safety: Mapping[str, Any] | None = None
    ) -> None:
        """Record that ``run`` started (its id, input and start time; no end yet).

        The session's older runs' step journals are deleted (their runs have ended).
        """
        with self._open(f"saving the start of run {run.id}", write=True) as tx:
            self._insert_run(tx, session_id, run, safety)
        self._started(session_id, run)

    def _insert_run(
        self, tx: Transaction, session_id: str, run: Run, safety: Mapping[str, Any] | None
    ) -> None:
        tx.run(
            f"INSERT INTO agentloop_runs ({RUN_COLUMNS}) VALUES (?, ?, ?, ?, NULL, 0, NULL)",
            (run.id, session_id, text_column(input_text(run.input)), run.started_at),
        )
        tx.run("DELETE FROM agentloop_steps WHERE session_id = ?", (session_id,))
        write_safety(tx, session_id, safety)

    def _started(self, session_id: str, run: Run) -> None:
        """``run`` is the session's run in flight: its texts start (``_encoded``)."""
        self._texts[run.id] = RunTexts(session_id)
        ended = self._in_flight.get(session_id)  # a run of the session that never finalized
        self._in_flight[session_id] = run.id
        if ended is not None and ended != run.id:
            self._texts.pop(ended, None)

    def save_turn(
        self,
        run_id: str,
        number: int,
        turn: Turn,
        messages: Sequence[Message],
        *,
        session_id: str | None = None,
        safety: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> None:
        """Append completed turn ``number`` (0-based) and the run messages it added.

        ``replace``: a turn ``number`` already stored goes first (a paused run continued again
        after a crash mid-continue saves its turns again).
        """
        texts = self._texts.get(run_id)
        if texts is None:
            texts = self._texts[run_id] = RunTexts(session_id)
        added = ",".join(texts.message(m) for m in messages)
        row = (run_id, number, texts.turn(turn), f"[{added}]")
        with self._open(f"saving turn {number} of run {run_id}", write=True) as tx:
            if replace:
                tx.run(
                    "DELETE FROM agentloop_turns WHERE run_id = ? AND number = ?", (run_id, number)
                )
            tx.run("INSERT INTO agentloop_turns VALUES (?, ?, ?, ?)", row)
            if session_id is not None:
                write_safety(tx, session_id, safety)

    def commit_compaction(
        self,
        session_id: str,
        run_id: str,
        history: Sequence[Message],
        absorbed: int,
        *,
        safety: Mapping[str, Any] | None = None,
    ) -> None:
        """Make ``history`` the stored history; ``absorbed`` run messages are now part of it."""
        texts = self._texts.get(run_id)
        rows = message_texts(history, [texts] if texts is not None else [])
        with self._open(f"saving the compaction of run {run_id}", write=True) as tx:
            write_history(tx, session_id, 0, rows)
            tx.run("UPDATE agentloop_runs SET absorbed = ? WHERE run_id = ?", (absorbed, run_id))
            write_safety(tx, session_id, safety)

    def finish_runs(
        self,
        session_id: str,
        runs: Sequence[Run],
        *,
        keep: int,
        append: Sequence[Message],
        safety: Mapping[str, Any] | None = None,
        release: str | None = None,
    ) -> None:
        """Record each run's end (``Run.to_dict``) and set history to ``history[:keep] + append``.

        ``release`` names a lease owner whose lease ends with this write. Raises
        ``MemoryBackendError`` when fewer than ``keep`` messages are stored.
        """
        texts = [self._texts.pop(run.id, None) for run in runs]
        if runs and self._in_flight.get(session_id) == runs[-1].id:
            self._in_flight.pop(session_id, None)
        records = [
            (
                run.id,
                session_id,
                text_column(input_text(run.input)),
                run.started_at,
                run.ended_at,
                0,
                record_json(run, encoded),
                *columns(run),
            )
            for run, encoded in zip(runs, texts, strict=True)
        ]
        rows = message_texts(append, [t for t in texts if t is not None])
        with self._open(f"saving the end of run {runs[-1].id if runs else '-'}", write=True) as tx:
            write_history(tx, session_id, keep, rows)
            tx.many(
                f"INSERT INTO agentloop_runs ({RUN_COLUMNS}, {_STATUS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET started_at = excluded.started_at, "
                "ended_at = excluded.ended_at, record = excluded.record, "
                "status = excluded.status, batch_id = excluded.batch_id, "
                "request_id = excluded.request_id",
                records,
            )
            tx.many("DELETE FROM agentloop_turns WHERE run_id = ?", [(r[0],) for r in records])
            write_safety(tx, session_id, safety)
            if release is not None:
                release_lease(tx, session_id, release)

    # -- reads -----------------------------------------------------------------------------

    def has_session(self, session_id: str) -> bool:
        """Whether anything (history or a run) is stored for ``session_id``."""
        with self._open(f"looking up session {session_id}", write=False) as tx:
            found = tx.rows(
                "SELECT 1 FROM agentloop_runs WHERE session_id = ? UNION ALL "
                "SELECT 1 FROM agentloop_history WHERE session_id = ?",
                (session_id, session_id),
            )
        return bool(found)

    def load_history(self, session_id: str) -> list[Message]:
        """The stored history of ``session_id`` (empty when there is none)."""
        with self._open(f"loading the history of session {session_id}", write=False) as tx:
            rows = tx.rows(
                "SELECT seq, message FROM agentloop_history WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
        try:
            return [
                message_from_dict(json_column(m, f"message {seq}"), f"message {seq}")
                for seq, m in rows
            ]
        except InvalidInput as exc:
            raise self._damaged(f"the history of session {session_id}", exc) from exc

    def load_runs(
        self, session_id: str | None = None, *, status: str | None = None
    ) -> list[StoredRun]:
        """Stored runs in the order they started; all sessions when ``session_id`` is None.

        ``status``: only the runs of that status (one of ``STATUSES``), found by the indexed
        ``status`` column. Raises ``MemoryBackendError`` naming the run and the field when a
        record is damaged.
        """
        runs = []
        for _, stored in self.scan_runs(session_id, status=status):
            if isinstance(stored, MemoryBackendError):
                raise stored
            runs.append(stored)
        return runs

    def scan_runs(
        self, session_id: str | None = None, *, status: str | None = None
    ) -> list[tuple[str, StoredRun | MemoryBackendError]]:
        """Each stored run's id with the run, or the error naming what is damaged in its record.

        ``load_runs`` for a reader that must not lose the readable runs to one damaged record.
        """
        where, params = where_runs(session_id or None, None, checked(status))
        with self._open("loading runs", write=False) as tx:
            rows = tx.rows(f"SELECT {RUN_COLUMNS} FROM agentloop_runs {where} ORDER BY seq", params)
            return read_runs(tx, rows, self._damaged)

    def page_runs(
        self,
        session_id: str | None = None,
        *,
        limit: int = 50,
        before: int | None = None,
        keep: Callable[[StoredRun | MemoryBackendError], bool] | None = None,
        scan: int | None = None,
        status: str | None = None,
    ) -> RunPage:
        """The newest ``limit`` runs (of ``session_id``, or all), newest first: one page.

        ``status``: only runs of that status (``STATUSES``), chosen in SQL by the indexed column
        (``total`` counts those).

        ``before`` is the ``next`` of the previous page (None: the newest runs); ``keep``
        filters the runs read (a damaged record is passed to it as its error), reading at most
        ``scan`` records for the page (None: until it is full). Only the page's records are
        read, by a keyset query, however many runs the store holds.
        """
        if limit < 1:
            raise InvalidInput(f"limit must be at least 1, got {limit}")
        status = checked(status)
        with self._open("listing runs", write=False) as tx:
            return runs_page(
                tx,
                self._damaged,
                session_id=session_id,
                limit=limit,
                before=before,
                keep=keep,
                scan=scan,
                status=status,
            )

    def runs_during(self, run_id: str) -> list[Found]:
        """``scan_runs`` of the runs that started while ``run_id`` ran (its sub-agents' among them).

        Those stored after it and started before its recorded end (every later one while it has
        none); empty when there is no such run.
        """
        with self._open(f"loading the runs during run {run_id}", write=False) as tx:
            return runs_during(tx, self._damaged, run_id)

    def runs_starting(self, prefix: str, *, limit: int = 2) -> list[Found]:
        """``scan_runs`` of the first ``limit`` runs whose id starts with ``prefix``.

        ``agentloop runs show 68bc`` finds its run this way, without reading the others.
        """
        with self._open(f"looking up runs starting {prefix!r}", write=False) as tx:
            return runs_starting(tx, self._damaged, prefix, limit)

    def load_run(self, run_id: str) -> StoredRun | None:
        """One stored run by its exact id, or None (``MemoryBackendError`` when damaged)."""
        with self._open(f"loading run {run_id}", write=False) as tx:
            rows = tx.rows(f"SELECT {RUN_COLUMNS} FROM agentloop_runs WHERE run_id = ?", (run_id,))
            stored = read_runs(tx, rows, self._damaged)[0][1] if rows else None
        if isinstance(stored, MemoryBackendError):
            raise stored
        return stored

    def _damaged(self, what: str, exc: InvalidInput) -> MemoryBackendError:
        return MemoryBackendError(f"{self.name}: {what} is damaged: {exc.message}")
