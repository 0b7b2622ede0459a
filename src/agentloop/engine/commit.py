"""What a run's end commits to its session's history: SPEC 5's four cases, and SPEC 25's wait.

Success commits every message; the cannot-fit family nothing (the input is kept as
``run.unfinished_input``); any other hard error the completed turns; a run that paused on
pending calls its completed turns (the paused turn is kept on the run, ``engine.pause``); a batch
run whose turn waits in a provider batch is recorded as waiting (``engine.batching``).
``run.messages`` is the run's whole audit, its interrupted tail closed when it ended in error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentloop.engine.no_history import NO_HISTORY
from agentloop.errors import (
    AgentLoopError,
    CompactionStalled,
    ContextExceeded,
    ContextLengthExceeded,
)
from agentloop.transcript import close_interrupted

if TYPE_CHECKING:
    from agentloop.engine.conversation import Conversation
    from agentloop.engine.state import RunState
    from agentloop.pausing import PendingCall

__all__ = ["commit_run"]

_CANNOT_FIT = (ContextExceeded, CompactionStalled, ContextLengthExceeded)


def commit_run(
    session: Conversation[Any],
    state: RunState,
    error: AgentLoopError | None,
    paused: tuple[PendingCall, ...],
) -> None:
    """The run's messages, and what of them the history commits (SPEC 5's four cases)."""
    run, history = state.run, session._history
    if history is NO_HISTORY:  # a new session's: its own list from now (``own_history``, inline)
        history = session._history = []
    tail = state.kept is None  # the audit is made now as the transcript's tail (``audit``)
    # the state's own list (nothing appends to it once the run ends): no copy; kept here too,
    # as a read of a ``Run`` pays its ``__getattr__`` hook (about 300 instructions on 3.11)
    messages = run.messages = state.audit if error is None else close_interrupted(state.audit)
    session._measured = None  # unless the whole transcript is committed (below)
    if state.waiting is not None:  # a batch run's turn waits in a provider batch (SPEC 25)
        from agentloop.engine.batching import waiting_record

        waiting_record(session, state)
    elif paused:
        from agentloop.engine.pause import paused_record

        limits = session.safety
        budget = limits.budget.snapshot() if limits.budget_on else None
        paused_record(session, state, paused, budget)
        history.extend(state.transcript[state.base : -1])  # all but the paused reply
    elif error is None:  # the tail just made is ``pending``: no second slice of it
        history.extend(messages if tail else state.pending)
        if state.shown is None:  # a filtered handoff's guard measured its view, not this
            session._measured = state.measure_of(session._history, state.call_ids)
    elif isinstance(error, _CANNOT_FIT):
        run.unfinished_input = run.input
    else:
        history.extend(state.completed)
    if session._keeper is not None:  # a stateless session: kept while paused (engine.stateless)
        session._keeper(session)
