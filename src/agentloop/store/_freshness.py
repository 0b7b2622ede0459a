"""Whether a session's store changed behind a live ``Session``: several processes, one session.

A web app's workers share one store, and each keeps the live ``Session`` it used last. When
another worker (a process, or another ``Agent`` of this one) has run the session since, the
cached history is stale: a run started from it would not send what the other worker added, and
its end would write over it. So a recorder remembers the store's **mark** for the session as of
its own last commit, and a run compares it with the store's before it starts:

- the mark is ``(newest run id, its status, history length)``: a run started elsewhere changes
  the first, a run ended, paused, decided or cancelled elsewhere the second or the third;
- ``lease`` reads who runs the session now, so opening a session another live process is
  running does not close its run as crashed.

Both are reads of the SQL stores (``SQLiteStore``, ``PostgresStore``); another ``Store`` returns
None, and a session on it is never checked (it behaves as before: one process per session).
"""

from __future__ import annotations

from typing import Any, TypeAlias

__all__ = ["EMPTY", "Mark", "lease", "mark"]

Mark: TypeAlias = "tuple[str | None, str | None, int]"
"""``(newest run id, its status, history length)`` of a stored session."""

EMPTY: Mark = (None, None, 0)
"""The mark of a session the store does not hold."""


def mark(store: Any, session_id: str) -> Mark | None:
    """The store's mark of ``session_id`` now; None when ``store`` cannot tell."""
    from agentloop.store._sql import SQLStore

    if not isinstance(store, SQLStore):
        return None
    with store._open(f"checking session {session_id}", write=False) as tx:
        newest = tx.rows(
            "SELECT run_id, status FROM agentloop_runs WHERE session_id = ? "
            "ORDER BY seq DESC LIMIT 1",
            (session_id,),
        )
        counted = tx.rows(
            "SELECT count(*) FROM agentloop_history WHERE session_id = ?", (session_id,)
        )
    run_id, status = (str(newest[0][0]), str(newest[0][1])) if newest else (None, None)
    return run_id, status, int(counted[0][0])


def lease(store: Any, session_id: str) -> tuple[str, float] | None:
    """Who holds the session's lease and until when; None when free (or not an SQL store)."""
    from agentloop.store._sql import SQLStore

    if not isinstance(store, SQLStore):
        return None
    from agentloop.store._durable import read_lease

    with store._open(f"checking session {session_id}", write=False) as tx:
        return read_lease(tx, session_id)
