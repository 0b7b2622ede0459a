"""The statements several of ``SQLStore``'s writes share: the history, the safety row, a lease.

Kept apart from ``_sql`` so each stays a readable size; each helper runs inside the caller's
transaction and commits nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentloop.errors import MemoryBackendError
from agentloop.store._rows import to_json

if TYPE_CHECKING:
    from agentloop.store._transaction import Transaction

__all__ = ["release_lease", "write_history", "write_safety"]


def write_history(tx: Transaction, session_id: str, keep: int, append: Sequence[str]) -> None:
    """Keep the session's first ``keep`` history rows (they must be there) and append ``append``.

    ``append``: the messages as JSON (``_encoded.message_texts``).
    """
    if keep:
        stored = tx.rows(
            "SELECT COUNT(*) FROM agentloop_history WHERE session_id = ? AND seq < ?",
            (session_id, keep),
        )[0][0]
        if stored != keep:
            raise MemoryBackendError(
                f"the stored history of session {session_id} has {stored} messages, "
                f"expected at least {keep}"
            )
    tx.run("DELETE FROM agentloop_history WHERE session_id = ? AND seq >= ?", (session_id, keep))
    if append:
        tx.many(
            "INSERT INTO agentloop_history VALUES (?, ?, ?)",
            [(session_id, keep + i, text) for i, text in enumerate(append)],
        )


def write_safety(tx: Transaction, session_id: str, safety: Mapping[str, Any] | None) -> None:
    """The session's safety state as of this commit point (nothing when None)."""
    if safety is None:
        return
    tx.run(
        "INSERT INTO agentloop_sessions (session_id, safety) VALUES (?, ?) "
        "ON CONFLICT (session_id) DO UPDATE SET safety = excluded.safety",
        (session_id, to_json(safety)),
    )


def release_lease(tx: Transaction, session_id: str, owner: str) -> None:
    """End ``owner``'s lease of the session (nothing when another process holds it)."""
    tx.run(
        "UPDATE agentloop_sessions SET lease_owner = NULL, lease_until = NULL "
        "WHERE session_id = ? AND lease_owner = ?",
        (session_id, owner),
    )
