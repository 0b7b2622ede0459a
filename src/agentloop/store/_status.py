"""A run's status as a column (schema 3): what it is, how it is written, how old stores get it.

``agentloop runs --status``, the viewer's filter and ``agentloop batch poll`` ask the store for
the runs of one status; with the status inside the JSON record that meant parsing every record.
So the runs table keeps it as a column (``status``, with a waiting run's ``batch_id`` and
``request_id``), written by the statements that already write the run: run start inserts
``running``, finalize (``finish_runs``) writes what the record says, a reopen (``continue_run``
after a crash) writes ``running`` again. Nothing else writes it, so it is never a statement more.

The status follows the record exactly (``status_of``): no recorded end is ``running``; then
pending calls are ``paused``, a ``BatchWait`` is ``waiting``, a ``stop_reason`` is ``failed``
(a cancelled run too: ``Cancelled`` is its stop reason), else ``completed``. A run being continued
keeps the status of its stored record until its continuation writes it: a batch run a poller is
applying stays ``waiting``, so a poller killed mid-apply leaves it to the next (SPEC 25).

A schema-2 (or schema-1) store gets the columns in the one DDL transaction of ``ensure_schema``
(under its lock): ``upgrade`` adds them (``running`` by default) with their index, and
``backfill`` sets each recorded run's status from its record, a chunk of rows at a time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop._util.statuses import STATUSES, RunStatus

if TYPE_CHECKING:
    from agentloop.run import Run
    from agentloop.store._transaction import Transaction

__all__ = [
    "STATUSES",
    "STATUS_COLUMNS",
    "RunStatus",
    "backfill",
    "checked",
    "columns",
    "record_status",
    "status_of",
    "upgrade",
]


STATUS_COLUMNS = (
    ("status", "TEXT NOT NULL DEFAULT 'running'"),
    ("batch_id", "TEXT"),
    ("request_id", "TEXT"),
)
"""Schema 3's columns of ``agentloop_runs``, added to a store whose recorded version is older."""

_CHUNK = 500


def checked(status: str | None) -> str | None:
    """``status`` when it is one of ``STATUSES`` (or None); else ``InvalidInput`` naming them."""
    if status is None or status in STATUSES:
        return status
    from agentloop.errors import InvalidInput

    raise InvalidInput(f"unknown run status {status!r}: one of {', '.join(STATUSES)}")


def status_of(run: Run[Any], finished: bool) -> RunStatus:
    """The status of ``run``; ``finished``: whether its end (a finalize) is recorded."""
    if not finished:
        return "running"
    if run.pending:
        return "paused"
    if run.waiting is not None:
        return "waiting"
    return "failed" if run.stop_reason is not None else "completed"


def columns(run: Run[Any]) -> tuple[str, str | None, str | None]:
    """``(status, batch_id, request_id)`` of a run whose end is being recorded."""
    wait = run.waiting
    status = status_of(run, True)
    if status != "waiting" or wait is None:
        return status, None, None
    return status, wait.batch_id, wait.request_id


def record_status(data: object) -> tuple[str, str | None, str | None]:
    """``columns`` of a stored record (``Run.to_dict``), read as plain JSON.

    A record that is not a JSON object is ``failed`` (every reader reports it as damaged).
    """
    if not isinstance(data, Mapping):
        return "failed", None, None
    wait = data.get("waiting")
    if data.get("pending"):
        return "paused", None, None
    if isinstance(wait, Mapping):
        batch, request = wait.get("batch_id"), wait.get("request_id")
        return "waiting", _text(batch), _text(request)
    return ("failed" if data.get("stop_reason") is not None else "completed"), None, None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def upgrade(tx: Transaction, *, postgres: bool) -> None:
    """Add the status columns and their index when missing, then ``backfill`` them.

    Run by ``ensure_schema`` on a new store and on one of an older version, in its transaction.
    """
    if postgres:
        have: set[str] = set()
    else:  # SQLite has no ADD COLUMN IF NOT EXISTS
        have = {str(r[0]) for r in tx.rows("SELECT name FROM pragma_table_info('agentloop_runs')")}
    for name, kind in STATUS_COLUMNS:
        if name not in have:
            maybe = " IF NOT EXISTS" if postgres else ""
            tx.run(f"ALTER TABLE agentloop_runs ADD COLUMN{maybe} {name} {kind}")
    tx.run("CREATE INDEX IF NOT EXISTS agentloop_runs_status ON agentloop_runs (status, seq)")
    backfill(tx)


def backfill(tx: Transaction) -> None:
    """Set each recorded run's status columns from its record (the upgrade to schema 3)."""
    after = -1
    while True:
        rows = tx.rows(
            "SELECT seq, run_id, record FROM agentloop_runs WHERE seq > ? AND record IS NOT NULL "
            "ORDER BY seq LIMIT ?",
            (after, _CHUNK),
        )
        if not rows:
            return
        updates = []
        for _, run_id, text in rows:
            try:
                data = json.loads(text)
            except (ValueError, TypeError, RecursionError):
                data = None
            updates.append((*record_status(data), run_id))
        tx.many(
            "UPDATE agentloop_runs SET status = ?, batch_id = ?, request_id = ? WHERE run_id = ?",
            updates,
        )
        after = int(rows[-1][0])
