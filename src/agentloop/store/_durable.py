"""``SQLStore``'s durability: the safety state, the step journal, the session's lease, a reopen.

What a ``DurableStore`` adds to a ``Store`` (``agentloop.store``), in the SQL both backends share;
a mixin of ``SQLStore``, kept apart so each module stays a readable size.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.run import Run
from agentloop.store._encoded import RunTexts, step_json
from agentloop.store._rows import json_column, messages_json, text_column, to_json
from agentloop.store._transaction import Transaction
from agentloop.store._writes import release_lease, write_history

__all__ = ["DurableSQL", "claim_lease", "read_lease"]


def read_lease(tx: Transaction, session_id: str) -> tuple[str, float] | None:
    """Who holds the session's lease and until when; None when nobody does."""
    rows = tx.rows(
        "SELECT lease_owner, lease_until FROM agentloop_sessions WHERE session_id = ?",
        (session_id,),
    )
    if not rows or rows[0][0] is None:
        return None
    return str(rows[0][0]), float(rows[0][1])


def claim_lease(
    tx: Transaction, session_id: str, owner: str, until: float, *, now: float, replace: str | None
) -> str | None:
    """``DurableSQL.claim`` inside the caller's transaction."""
    held = read_lease(tx, session_id)
    if held is not None and held[0] not in (owner, replace) and held[1] > now:
        return held[0]
    tx.run(
        "INSERT INTO agentloop_sessions (session_id, lease_owner, lease_until) "
        "VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
        "lease_owner = excluded.lease_owner, lease_until = excluded.lease_until",
        (session_id, owner, until),
    )
    return None


class DurableSQL:
    """The ``DurableStore`` calls of ``SQLStore`` (which supplies ``_open`` and the rest)."""

    _texts: dict[str, RunTexts]

    def _open(self, what: str, *, write: bool) -> AbstractContextManager[Transaction]:
        raise NotImplementedError

    def _damaged(self, what: str, exc: InvalidInput) -> MemoryBackendError:
        raise NotImplementedError

    def load_safety(self, session_id: str) -> dict[str, Any] | None:
        """The safety state stored at the session's last commit point, or None."""
        with self._open(f"loading the safety state of session {session_id}", write=False) as tx:
            rows = tx.rows(
                "SELECT safety FROM agentloop_sessions WHERE session_id = ?", (session_id,)
            )
            if not rows or rows[0][0] is None:
                return None
            data = json.loads(rows[0][0])
            if not isinstance(data, dict):
                raise ValueError("the safety state is not a JSON object")
            return data

    def save_step(self, session_id: str, run_id: str, key: str, value: Mapping[str, Any]) -> None:
        """Journal one step of a run in flight (a model reply, a tool call's output)."""
        row = (session_id, run_id, text_column(key), step_json(value, self._texts.get(run_id)))
        with self._open(f"journaling step {key} of run {run_id}", write=True) as tx:
            tx.run(
                "INSERT INTO agentloop_steps VALUES (?, ?, ?, ?) ON CONFLICT (run_id, key) "
                "DO UPDATE SET value = excluded.value",
                row,
            )

    def load_steps(self, run_id: str) -> dict[str, Any]:
        """Every journaled step of ``run_id`` by key."""
        with self._open(f"loading the steps of run {run_id}", write=False) as tx:
            rows = tx.rows("SELECT key, value FROM agentloop_steps WHERE run_id = ?", (run_id,))
        try:
            return {str(key): json_column(value, f"step {key}") for key, value in rows}
        except InvalidInput as exc:
            raise self._damaged(f"the step journal of run {run_id}", exc) from exc

    def claim(
        self, session_id: str, owner: str, until: float, *, now: float, replace: str | None = None
    ) -> str | None:
        """Take the session's lease for ``owner`` until ``until`` (wall-clock seconds).

        Succeeds (returns None) when the lease is free, expired at ``now``, already ``owner``'s,
        or held by ``replace``; otherwise returns the current holder and changes nothing.
        """
        with self._open(f"claiming session {session_id}", write=True) as tx:
            return claim_lease(tx, session_id, owner, until, now=now, replace=replace)

    def release(self, session_id: str, owner: str) -> None:
        """End ``owner``'s lease of the session (nothing when another process holds it)."""
        with self._open(f"releasing session {session_id}", write=True) as tx:
            release_lease(tx, session_id, owner)

    def reopen_run(self, session_id: str, run: Run, *, keep: int, at: float) -> None:
        """Undo a resume's closure of crashed ``run`` so it can go on (``continue_run``).

        In one transaction: the run has no recorded end again, its completed turns are stored
        as turns of a run in flight, the history is cut back to its first ``keep`` messages
        (what the closure added goes), and the resumption is noted.
        """
        with self._open(f"reopening run {run.id}", write=True) as tx:
            write_history(tx, session_id, keep, [])
            tx.run(
                "UPDATE agentloop_runs SET record = NULL, ended_at = NULL, status = 'running', "
                "batch_id = NULL, request_id = NULL WHERE run_id = ?",
                (run.id,),
            )
            tx.run("DELETE FROM agentloop_turns WHERE run_id = ?", (run.id,))
            last = len(run.turns) - 1
            tx.many(
                "INSERT INTO agentloop_turns VALUES (?, ?, ?, ?)",
                [
                    (
                        run.id,
                        i,
                        to_json(t.to_dict()),
                        messages_json(run.messages if i == last else []),
                    )
                    for i, t in enumerate(run.turns)
                ],
            )
            tx.run(
                "INSERT INTO agentloop_resumptions VALUES (?, ?, ?)", (run.id, at, len(run.turns))
            )
