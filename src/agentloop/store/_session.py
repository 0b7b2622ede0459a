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
written back, so the store and the resumed agent agree; ``continue_run`` can still pick such a
run up (``continuable``), its crash ``InternalError`` then replaced by its real end.

With a ``DurableStore`` the recorder also writes the safety state (``snapshot``) in each commit
point's transaction, journals steps (``agentloop.engine.journal``), and holds the session's
lease from run start to finalize: a process that finds the lease held by another live process
gets ``MemoryBackendError``. A lease is stale when it expired (``LEASE_SECONDS`` after its last
renewal; renewed as turns complete) or when its holder is a process of this host that is gone.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentloop.errors import InternalError, MemoryBackendError
from agentloop.messages import Message
from agentloop.run import Run
from agentloop.store import DurableStore, Store, StoredRun, _freshness
from agentloop.store._status import columns

__all__ = [
    "CRASHED_TEXT",
    "LEASE_SECONDS",
    "SessionRecorder",
    "continuable",
    "load_safety",
    "process_owner",
    "restore",
]

LEASE_SECONDS = 300.0
"""How long a session's lease lasts without renewal (renewed as turns complete)."""

logger = logging.getLogger("agentloop")

CRASHED_TEXT = "the process stopped before the run finished"
"""The ``InternalError`` message of a run found without a recorded end on resume."""


def process_owner() -> str:
    """This process as a lease owner: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner() -> str:
    """One recorder as a lease owner: ``host:pid/n`` (two agents of a process are two owners)."""
    return f"{process_owner()}/{next(_RECORDERS)}"


_RECORDERS = itertools.count(1)


def _gone(owner: str) -> bool:
    """Whether ``owner`` is a process of this host that no longer runs."""
    host, _, pid = owner.partition("/")[0].rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


class SessionRecorder:
    """Writes one session's commit points to a ``Store``."""

    def __init__(self, store: Store, session_id: str, *, synced: int = 0) -> None:
        self.store = store
        self.session_id = session_id
        self.durable: DurableStore | None = store if isinstance(store, DurableStore) else None
        from agentloop.store._sql import SQLStore

        self._encodes = isinstance(store, SQLStore)
        """The store takes a reply's ``Message`` in a journal step (``step``)."""
        self.snapshot: Callable[[], Mapping[str, Any]] | None = None
        self.owner = _owner()
        self._renew_at = 0.0
        self._continuing: str | None = None
        self._synced: int | None = synced
        self._saved: dict[str, int] = {}
        self._unsaved: list[Run] = []
        self._replacing: set[str] = set()
        self._mark: _freshness.Mark | None = _freshness.EMPTY if not synced else None
        """The store's mark of the session as of this recorder's last commit (None: unknown)."""
        self._refused: str | None = None  # a run whose start the store refused: never written

    def rewrite_history(self) -> None:
        """The history changed before its end (an append-only base, SPEC 28): rewrite it whole."""
        self._synced = 0

    def _safety(self) -> Mapping[str, Any] | None:
        """The ``safety=`` of a durable write: the snapshot, or None when nothing takes one."""
        return None if self.snapshot is None else self.snapshot()

    def claim(self) -> None:
        """Take (or renew) the session's lease; ``MemoryBackendError`` if a live process has it."""
        store = self.durable
        if store is None:
            return
        now = time.time()
        holder = store.claim(self.session_id, self.owner, now + LEASE_SECONDS, now=now)
        if holder is not None and _gone(holder):
            holder = store.claim(
                self.session_id, self.owner, now + LEASE_SECONDS, now=now, replace=holder
            )
        if holder is not None:
            raise MemoryBackendError(
                f"session {self.session_id!r} is being run by another process ({holder}); "
                "one process at a time runs a session"
            )
        self._renew_at = now + LEASE_SECONDS / 3

    def marked(self, mark: _freshness.Mark | None = None) -> None:
        """The session is as the store holds it now (``mark``, else read from the store)."""
        self._mark = _freshness.mark(self.store, self.session_id) if mark is None else mark

    def reloaded(self, synced: int) -> None:
        """The session was just restored from the store: ``synced`` messages, its mark now."""
        self._synced = synced
        self._unsaved = []
        self.marked()

    def fresh(self) -> bool:
        """Whether the store holds the session as this recorder last left it.

        True when it cannot tell (another ``Store``, or a failed write left this process ahead
        of the store: the next commit rewrites it).
        """
        if self._mark is None:
            return True
        return _freshness.mark(self.store, self.session_id) in (None, self._mark)

    def release(self) -> None:
        """Give the lease back (logged, never raised: the lease expires anyway)."""
        if self.durable is not None:
            try:
                self.durable.release(self.session_id, self.owner)
            except MemoryBackendError as error:
                logger.warning("could not release session %s: %s", self.session_id, error)

    def step(self, run_id: str, key: str, value: Mapping[str, Any]) -> None:
        """Journal one step of the run in flight (a no-op for a plain store).

        A reply's ``message`` may be the ``Message``: ``SQLStore`` reuses its JSON for the turn's
        row (``_encoded``); any other store gets plain data.
        """
        if self.durable is None:
            return
        message = value.get("message")
        if isinstance(message, Message) and not self._encodes:
            value = {**value, "message": message.to_dict()}
        self.durable.save_step(self.session_id, run_id, key, value)

    def begin(self, run: Run) -> None:
        """Run start; raises ``MemoryBackendError`` (and then writes nothing at its end)."""
        if run.id == self._continuing:  # reopened already, lease held
            self._continuing = None
            return
        self._refused = run.id
        self.claim()
        if not self.fresh():  # another process ran it between this run's start and its lease
            self.release()
            raise MemoryBackendError(
                f"session {self.session_id!r} changed in another process as this run started; "
                "nothing was written: run it again"
            )
        self._refused = None
        if self.durable is not None:
            self.durable.begin_run(self.session_id, run, safety=self._safety())
        else:
            self.store.begin_run(self.session_id, run)
        self._saved[run.id] = 0

    def reopened(self, run: Run, *, keep: int) -> None:
        """``continue_run`` picks ``run`` up: undo its closure; the history is ``keep`` long."""
        if self.durable is None:
            raise MemoryBackendError("a plain Store cannot continue a run")
        self.durable.reopen_run(self.session_id, run, keep=keep, at=time.time())
        self._synced = keep
        self._unsaved = []
        self._saved[run.id] = len(run.messages)
        self._continuing = run.id

    def decided(self, run: Run, history: Sequence[Message]) -> None:
        """Record a paused run's decisions before any decided call runs (the lease kept).

        Raises ``MemoryBackendError``.
        """
        keep = len(history)
        if self.durable is not None:
            self.durable.finish_runs(
                self.session_id, [run], keep=keep, append=(), safety=self._safety(), release=None
            )
        else:
            self.store.finish_runs(self.session_id, [run], keep=keep, append=())
        self._synced = keep
        self._mark = (run.id, columns(run)[0], keep)

    def continuing(self, run: Run, saved: int) -> None:
        """A paused run goes on: ``saved`` of its messages are stored; its lease is held.

        The turns it saves from here replace any a crashed continue saved before.
        """
        self._continuing = run.id
        self._saved[run.id] = saved
        self._replacing.add(run.id)

    def turn_completed(self, run: Run, messages: Sequence[Message]) -> None:
        """A turn completed; ``messages`` are all of the run's messages so far."""
        saved = self._saved.get(run.id, 0)
        number, turn, added = len(run.turns) - 1, run.turns[-1], messages[saved:]
        if self.durable is not None:
            self.durable.save_turn(
                run.id,
                number,
                turn,
                added,
                session_id=self.session_id,
                safety=self._safety(),
                **({"replace": True} if run.id in self._replacing else {}),
            )
            if time.time() >= self._renew_at:
                self.claim()
        else:
            self.store.save_turn(run.id, number, turn, added)
        self._saved[run.id] = len(messages)

    def compacted(self, run: Run, history: Sequence[Message], absorbed: int) -> None:
        """Compaction made ``history`` the history; raises ``MemoryBackendError``."""
        if self.durable is not None:
            self.durable.commit_compaction(
                self.session_id, run.id, history, absorbed, safety=self._safety()
            )
        else:
            self.store.commit_compaction(self.session_id, run.id, history, absorbed)
        self._synced = len(history)
        if self._unsaved:
            self._finish([], history)

    def finished(self, run: Run, history: Sequence[Message]) -> MemoryBackendError | None:
        """Finalize: save ``run`` and the committed ``history``; return (not raise) a failure.

        A run whose start the store refused (another process holds the session, or changed
        it) writes nothing: what the store holds is the other process's.
        """
        self._saved.pop(run.id, None)
        self._replacing.discard(run.id)
        if run.id == self._refused:
            self._refused = None
            return None
        return self._finish([run], history)

    def _finish(self, runs: list[Run], history: Sequence[Message]) -> MemoryBackendError | None:
        runs = [*self._unsaved, *runs]
        synced = self._synced
        keep = synced if synced is not None and synced <= len(history) else 0
        try:
            self._write_end(runs, keep, history[keep:])
        except MemoryBackendError as error:
            logger.warning("could not persist run %s: %s", runs[-1].id, error, exc_info=error)
            self._unsaved = runs
            self._synced = self._mark = None
            if runs:  # the end was not written: the lease still goes (the run is over here)
                self.release()
            return error
        self._unsaved = []
        self._synced = len(history)
        if runs:
            self._mark = (runs[-1].id, columns(runs[-1])[0], len(history))
        return None

    def _write_end(self, runs: list[Run], keep: int, append: Sequence[Message]) -> None:
        """``finish_runs``; a durable store also takes the safety state and ends the lease."""
        if self.durable is None:
            self.store.finish_runs(self.session_id, runs, keep=keep, append=append)
            return
        self.durable.finish_runs(
            self.session_id,
            runs,
            keep=keep,
            append=append,
            safety=self._safety(),
            release=self.owner if runs else None,
        )


Closing = Callable[[list[Message], list[Run]], "list[Message] | None"]
"""What the engine makes of a history once crashed runs' turns joined it (None: nothing)."""


def restore(
    store: Store, session_id: str, *, owner: str | None = None, closing: Closing | None = None
) -> tuple[list[Message], list[Run]]:
    """A session's history and runs; runs without a recorded end are closed and saved.

    Unless a live process other than ``owner`` holds the session's lease: its run is in flight,
    not crashed, and stays as stored (no end yet). ``closing`` edits the history the closed
    runs made, as their finalize would have (``agentloop.engine.handoffs.views_closed``); the
    edit is written in the closure's own transaction.
    """
    history = store.load_history(session_id)
    stored = store.load_runs(session_id)
    orphans = [s for s in stored if not s.finished]
    if orphans and not _running_elsewhere(store, session_id, owner):
        closed = [s.run for s in orphans]
        keep, whole = len(history), [*history, *(m for s in orphans for m in _close(s))]
        edited = None if closing is None else closing(whole, closed)
        if edited is not None:  # rewritten from its first changed message on
            same = zip(whole, edited, strict=False)
            changed = next((i for i, (a, b) in enumerate(same) if a is not b), keep)
            keep, whole = min(keep, changed), edited
        store.finish_runs(session_id, closed, keep=keep, append=whole[keep:])
        history = whole
    return history, [s.run for s in stored]


def _running_elsewhere(store: Store, session_id: str, owner: str | None) -> bool:
    """Whether a live process other than ``owner`` holds the session's lease (not expired)."""
    held = _freshness.lease(store, session_id)
    if held is None or held[0] == owner:
        return False
    return held[1] > time.time() and not _gone(held[0])


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


def load_safety(store: Store, session_id: str) -> dict[str, Any] | None:
    """The session's stored safety state (None for a plain store or when nothing is stored)."""
    if not isinstance(store, DurableStore):
        return None
    return store.load_safety(session_id)


def continuable(store: Store, session_id: str) -> StoredRun | None:
    """The session's last run if a crash ended it and ``continue_run`` may pick it up."""
    stored = store.load_runs(session_id)
    if not stored:
        return None
    last = stored[-1]
    stop = last.run.stop_reason
    if not last.finished or not isinstance(stop, InternalError):
        return None
    return last if str(stop).startswith(CRASHED_TEXT) else None
