"""Listing stored runs a page at a time, newest first, without reading the whole store.

``agentloop runs`` and the viewer show the newest runs of a store that may hold a hundred
thousand. A page is one keyset query on the runs table's primary key (``seq < cursor ORDER BY
seq DESC LIMIT n``, or the ``(session_id, seq)`` index for one session), then one query each
for the page's turns in flight and its resumptions (``run_id IN (...)``), never one per run;
only the page's records are parsed. ``RunPage.next`` is the cursor of the older page.

A status is a column (``status``, indexed with ``seq``): a page of one status is the same
keyset query on that index. Another filter (``keep``) is applied to parsed runs (a model and an
error class live inside the record), so such a page reads chunks of ``CHUNK`` rows until it is
full, the store is exhausted, or it has read ``scan`` rows (then ``next`` goes on from there): a
page of a filter that matches nothing costs ``scan`` records, not the whole store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentloop._util.slots import record
from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.store._rows import StoredRun, stored_run
from agentloop.store._tables import RUN_COLUMNS

if TYPE_CHECKING:
    from agentloop.store._transaction import Row, Transaction

__all__ = [
    "CHUNK",
    "Found",
    "RunPage",
    "read_runs",
    "runs_during",
    "runs_page",
    "runs_starting",
    "where_runs",
]

CHUNK = 200
"""Rows a filtered page reads at a time."""

Found = tuple[str, "StoredRun | MemoryBackendError"]
"""A run's id with the run, or the error naming what is damaged in its record."""

_MAX_IN = 500  # bound parameters per ``IN (...)``: well under SQLite's and libpq's limits


@record
class RunPage:
    """One page of stored runs, newest first.

    Attributes:
        runs: Each run's id with the run, or the ``MemoryBackendError`` naming what is damaged
            in its record (the readable runs are never lost to a damaged one).
        total: How many runs the store holds (of the session, when one was asked for),
            filtered or not.
        next: The cursor of the next (older) page, for ``before=``; None on the last page.
    """

    runs: list[Found]
    total: int
    next: int | None


def runs_page(
    tx: Transaction,
    damaged: Callable[[str, InvalidInput], MemoryBackendError],
    *,
    session_id: str | None,
    limit: int,
    before: int | None,
    keep: Callable[[StoredRun | MemoryBackendError], bool] | None,
    scan: int | None,
    status: str | None = None,
) -> RunPage:
    """The newest ``limit`` runs of ``status`` (all when None) older than cursor ``before``.

    Those ``keep`` lets through; ``scan`` bounds the rows a ``keep``-filtered page reads: the
    page ends there, ``next`` going on.
    """
    where, params = where_runs(session_id, None, status)
    total = int(tx.rows(f"SELECT COUNT(*) FROM agentloop_runs {where}", params)[0][0])
    found: list[Found] = []
    cursor, read = before, 0
    while len(found) < limit:
        if scan is not None and read >= scan:
            return RunPage(found, total, cursor)
        want = limit - len(found) if keep is None else CHUNK
        want = want if scan is None else min(want, scan - read)
        read += want
        where, params = where_runs(session_id, cursor, status)
        rows = tx.rows(
            f"SELECT seq, {RUN_COLUMNS} FROM agentloop_runs {where} ORDER BY seq DESC LIMIT ?",
            (*params, want + 1),
        )
        more = len(rows) > want
        rows = rows[:want]
        for row, one in zip(rows, read_runs(tx, [r[1:] for r in rows], damaged), strict=True):
            cursor = int(row[0])
            if keep is None or keep(one[1]):
                found.append(one)
                if len(found) == limit:
                    more = more or row is not rows[-1]
                    break
        if not more:
            return RunPage(found, total, None)
    return RunPage(found, total, cursor)


def runs_during(
    tx: Transaction, damaged: Callable[[str, InvalidInput], MemoryBackendError], run_id: str
) -> list[Found]:
    """The runs stored after ``run_id`` that started before its recorded end (all, without one).

    A sub-agent's run starts while its parent runs, and its own sub-agents' while it does: the
    viewer finds a run's nested runs here, not by reading the whole store.
    """
    found = tx.rows("SELECT seq, ended_at FROM agentloop_runs WHERE run_id = ?", (run_id,))
    if not found:
        return []
    seq, ended = found[0]
    window, params = ("", (seq,)) if ended is None else (" AND started_at <= ?", (seq, ended))
    rows = tx.rows(
        f"SELECT {RUN_COLUMNS} FROM agentloop_runs WHERE seq > ?{window} ORDER BY seq", params
    )
    return read_runs(tx, rows, damaged)


def runs_starting(
    tx: Transaction,
    damaged: Callable[[str, InvalidInput], MemoryBackendError],
    prefix: str,
    limit: int,
) -> list[Found]:
    """The first ``limit`` runs whose id starts with ``prefix``, in the order they started.

    The ids are compared in SQL (``substr``, in both dialects): only the matches are parsed.
    """
    rows = tx.rows(
        f"SELECT {RUN_COLUMNS} FROM agentloop_runs WHERE substr(run_id, 1, ?) = ? "
        "ORDER BY seq LIMIT ?",
        (len(prefix), prefix, limit),
    )
    return read_runs(tx, rows, damaged)


def where_runs(
    session_id: str | None, before: int | None, status: str | None = None
) -> tuple[str, tuple[Any, ...]]:
    """The ``WHERE`` clause (and its parameters) of runs of a session, status, before a cursor."""
    tests: list[str] = []
    params: list[Any] = []
    if session_id is not None:
        tests.append("session_id = ?")
        params.append(session_id)
    if status is not None:
        tests.append("status = ?")
        params.append(status)
    if before is not None:
        tests.append("seq < ?")
        params.append(before)
    return ("WHERE " + " AND ".join(tests) if tests else ""), tuple(params)


def read_runs(
    tx: Transaction,
    rows: Sequence[Row],
    damaged: Callable[[str, InvalidInput], MemoryBackendError],
) -> list[Found]:
    """Runs from their ``RUN_COLUMNS`` rows, their other rows fetched a few queries at a time."""
    found: list[Found] = []
    for start in range(0, len(rows), _MAX_IN):
        chunk = rows[start : start + _MAX_IN]
        unfinished = [str(row[0]) for row in chunk if row[-1] is None]  # no record column yet
        turns = _by_run(
            tx, "SELECT run_id, number, turn, messages FROM agentloop_turns", unfinished, "number"
        )
        resumed = _by_run(
            tx,
            "SELECT run_id, at, from_turn FROM agentloop_resumptions",
            [str(row[0]) for row in chunk],
            "at",
        )
        for row in chunk:
            run_id = str(row[0])
            try:
                one: StoredRun | MemoryBackendError = stored_run(
                    row, turns.get(run_id, []), resumed.get(run_id, [])
                )
            except InvalidInput as exc:
                one = damaged(f"run {run_id}", exc)
                one.__cause__ = exc
            found.append((run_id, one))
    return found


def _by_run(tx: Transaction, select: str, run_ids: list[str], order: str) -> dict[str, list[Row]]:
    """``select``'s rows for ``run_ids`` (its first column), each run's in ``order``."""
    if not run_ids:
        return {}
    marks = ", ".join("?" * len(run_ids))
    rows = tx.rows(f"{select} WHERE run_id IN ({marks}) ORDER BY run_id, {order}", run_ids)
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(str(row[0]), []).append(row[1:])
    return grouped
