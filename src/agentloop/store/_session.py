"""The engine's side of persistence: what one session writes at each commit point, and resume.

``SessionRecorder`` turns the engine's commit points into ``Store`` calls:

- run start → ``begin_run`` (a failure raises: the run fails before its first request);
- each completed turn → ``save_turn`` with the messages the turn added (append-only; a failure
  raises ``MemoryBackendError`` and ends the run, whose completed turns still commit);
- the compaction commit → ``commit_compaction`` (a failure raises likewise);
- finalize → ``finish_runs``: the run record and the history change in one transaction. A
  failure is logged and returned, never raised: the run's own outcome stands. The recorder then
  knows the store is behind, and the next successful finalize rewrites the whole history and
  re-saves the run records it missed.

``restore`` rebuilds a session for ``Agent.resume``. A run with no recorded end (the process died
mid-run) is closed the way a salvaging finalize would have closed it: its completed turns join
the history, after what a compaction already folded in; its ``stop_reason`` becomes
``InternalError`` ("the process stopped before the run finished") — unless its last saved turn
was the final reply, in which case it had completed and is restored as completed. The closure is
written back, so the store and the resumed agent agree.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from agentloop.errors import InternalError, MemoryBackendError
from agentloop.messages import Message
from agentloop.run import Run
from agentloop.store import Store, StoredRun

__all__ = ["CRASHED_TEXT", "SessionRecorder", "restore"]

logger = logging.getLogger("agentloop")

CRASHED_TEXT = "the process stopped before the run finished"
"""The ``InternalError`` message of a run found without a recorded end on resume."""


class SessionRecorder:
    """Writes one session's commit points to a ``Store``."""

    def __init__(self, store: Store, session_id: str, *, synced: int = 0) -> None:
        self.store = store
        self.session_id = session_id
        self._synced: int | None = synced
        self._saved: dict[str, int] = {}
        self._unsaved: list[Run] = []

    def begin(self, run: Run) -> None:
        """Run start; raises ``MemoryBackendError``."""
        self.store.begin_run(self.session_id, run)
        self._saved[run.id] = 0

    def turn_completed(self, run: Run, messages: Sequence[Message]) -> None:
        """A turn completed; ``messages`` are all of the run's messages so far."""
        saved = self._saved.get(run.id, 0)
        self.store.save_turn(run.id, len(run.turns) - 1, run.turns[-1], messages[saved:])
        self._saved[run.id] = len(messages)

    def compacted(self, run: Run, history: Sequence[Message], absorbed: int) -> None:
        """Compaction made ``history`` the history; raises ``MemoryBackendError``."""
        self.store.commit_compaction(self.session_id, run.id, history, absorbed)
        self._synced = len(history)
        if self._unsaved:
            self._finish([], history)

    def finished(self, run: Run, history: Sequence[Message]) -> MemoryBackendError | None:
        """Finalize: save ``run`` and the committed ``history``; return (not raise) a failure."""
        self._saved.pop(run.id, None)
        return self._finish([run], history)

    def _finish(self, runs: list[Run], history: Sequence[Message]) -> MemoryBackendError | None:
        runs = [*self._unsaved, *runs]
        synced = self._synced
        keep = synced if synced is not None and synced <= len(history) else 0
        try:
            self.store.finish_runs(self.session_id, runs, keep=keep, append=history[keep:])
        except MemoryBackendError as error:
            logger.warning("could not persist run %s: %s", runs[-1].id, error, exc_info=error)
            self._unsaved = runs
            self._synced = None
            return error
        self._unsaved = []
        self._synced = len(history)
        return None


def restore(store: Store, session_id: str) -> tuple[list[Message], list[Run]]:
    """A session's history and runs; runs without a recorded end are closed and saved."""
    history = store.load_history(session_id)
    stored = store.load_runs(session_id)
    orphans = [s for s in stored if not s.finished]
    if orphans:
        added = [m for s in orphans for m in _close(s)]
        store.finish_runs(session_id, [s.run for s in orphans], keep=len(history), append=added)
        history.extend(added)
    return history, [s.run for s in stored]


def _close(stored: StoredRun) -> list[Message]:
    """Close a run the process never finalized; return what it commits to the history."""
    run = stored.run
    last = run.turns[-1] if run.turns else None
    if last is not None and not last.tool_calls:
        run.output = last.text
    else:
        run.stop_reason = InternalError(
            f"{CRASHED_TEXT} ({len(run.turns)} completed turns were saved)"
        )
    return run.messages[stored.absorbed :]
