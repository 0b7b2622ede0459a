"""Persistence: the ``Store`` protocol and its two implementations.

A store keeps, per session, the committed history (the messages the next run is sent) and every
run record (``Run.to_dict``, ``stop_reason`` included). The engine writes at its commit points:
run start (``begin_run``), every completed turn (``save_turn``, append-only), the compaction
commit (``commit_compaction``) and finalize (``finish_runs``). ``Agent.resume`` reads it back.
``SQLiteStore`` (stdlib ``sqlite3``) is the embedded default; ``PostgresStore`` speaks psycopg 3
(the ``postgres`` extra). Every failure of a store is a ``MemoryBackendError``.

A ``DurableStore`` (both of ours) also keeps what a run needs to outlive its process: the safety
state at each commit point, the step journal of the run in flight, and a lease that lets one
process at a time run a session (``Agent.resume`` restores the first, ``continue_run`` uses all
three). A plain ``Store`` still works; its sessions just cannot be continued.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentloop._util.lazy import lazy_exports
from agentloop.messages import Message
from agentloop.run import Run, Turn

if TYPE_CHECKING:
    from agentloop.store._listing import RunPage
    from agentloop.store._sql import StoredRun
    from agentloop.store.postgres import PostgresStore
    from agentloop.store.sqlite import SQLiteStore

__all__ = ["DurableStore", "PostgresStore", "RunPage", "SQLiteStore", "Store", "StoredRun"]

# The engine needs only the protocols; the backends (sqlite3, psycopg) load on first use.
_LAZY = {
    "PostgresStore": "agentloop.store.postgres",
    "RunPage": "agentloop.store._listing",
    "SQLiteStore": "agentloop.store.sqlite",
    "StoredRun": "agentloop.store._sql",
}
if not TYPE_CHECKING:  # mypy sees the imports above, and no other name
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


@runtime_checkable
class Store(Protocol):
    """Where an ``Agent`` persists its committed history and its runs.

    Every method is synchronous and small; each write is one transaction (all or nothing). A
    failure raises ``MemoryBackendError`` with the backend's exception as ``__cause__``.
    """

    def has_session(self, session_id: str) -> bool:
        """Whether anything (history or a run) is stored for ``session_id``."""
        ...

    def begin_run(self, session_id: str, run: Run) -> None:
        """Record that ``run`` started (its id, input and start time; no end yet)."""
        ...

    def save_turn(self, run_id: str, number: int, turn: Turn, messages: Sequence[Message]) -> None:
        """Append completed turn ``number`` (0-based) and the run messages it added."""
        ...

    def commit_compaction(
        self, session_id: str, run_id: str, history: Sequence[Message], absorbed: int
    ) -> None:
        """Make ``history`` the stored history; ``absorbed`` run messages are now part of it."""
        ...

    def finish_runs(
        self, session_id: str, runs: Sequence[Run], *, keep: int, append: Sequence[Message]
    ) -> None:
        """Record each run's end (``Run.to_dict``) and set history to ``history[:keep] + append``.

        Raises ``MemoryBackendError`` when fewer than ``keep`` messages are stored.
        """
        ...

    def load_history(self, session_id: str) -> list[Message]:
        """The stored history of ``session_id`` (empty when there is none)."""
        ...

    def load_runs(self, session_id: str | None = None) -> list[StoredRun]:
        """Stored runs in the order they started; all sessions when ``session_id`` is None."""
        ...

    def load_run(self, run_id: str) -> StoredRun | None:
        """One stored run by its exact id, or None."""
        ...

    def close(self) -> None:
        """Release the connection (idempotent)."""
        ...


@runtime_checkable
class DurableStore(Store, Protocol):
    """A ``Store`` that runs can outlive their process with (``SQLiteStore``, ``PostgresStore``).

    Its ``begin_run``, ``save_turn`` (with ``session_id``), ``commit_compaction`` and
    ``finish_runs`` also take ``safety=`` (the ``SafetyState`` snapshot, written in the same
    transaction) and ``finish_runs`` takes ``release=`` (a lease owner).
    """

    def begin_run(
        self, session_id: str, run: Run, *, safety: Mapping[str, Any] | None = None
    ) -> None:
        """``Store.begin_run``, with the safety state in the same transaction."""
        ...

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
        """``Store.save_turn``, with the session's safety state in the same transaction.

        ``replace``: a turn ``number`` already stored is replaced (a paused run continued again
        after a crash mid-continue).
        """
        ...

    def commit_compaction(
        self,
        session_id: str,
        run_id: str,
        history: Sequence[Message],
        absorbed: int,
        *,
        safety: Mapping[str, Any] | None = None,
    ) -> None:
        """``Store.commit_compaction``, with the safety state in the same transaction."""
        ...

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
        """``Store.finish_runs``, with the safety state; ``release`` ends that owner's lease."""
        ...

    def load_safety(self, session_id: str) -> dict[str, Any] | None:
        """The safety state stored at the session's last commit point, or None."""
        ...

    def save_step(self, session_id: str, run_id: str, key: str, value: Mapping[str, Any]) -> None:
        """Journal one step of a run in flight."""
        ...

    def load_steps(self, run_id: str) -> dict[str, Any]:
        """Every journaled step of ``run_id`` by key."""
        ...

    def claim(
        self, session_id: str, owner: str, until: float, *, now: float, replace: str | None = None
    ) -> str | None:
        """Take the session's lease; None on success, else the holder (nothing changed)."""
        ...

    def release(self, session_id: str, owner: str) -> None:
        """End ``owner``'s lease of the session."""
        ...

    def reopen_run(self, session_id: str, run: Run, *, keep: int, at: float) -> None:
        """Undo a resume's closure of a crashed run so ``continue_run`` can go on with it."""
        ...
