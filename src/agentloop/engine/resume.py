"""Picking a stored session back up: the run a crash cut off.

``restore_safety`` (``agentloop.engine.refresh``) puts back what ``SafetyState.snapshot`` stored
at the last commit point (``Agent.resume`` and ``continue_run``). ``reopen`` rebuilds the state
of the run its process never finalized, from its last completed turn, with the session's lease
taken: the engine then drives it like any run, the journal answering for what already happened
(``agentloop.engine.journal``).
"""

from __future__ import annotations

from typing import Any

from agentloop.cancel import CancelToken
from agentloop.engine.conversation import Conversation
from agentloop.engine.journal import Journal
from agentloop.engine.refresh import closing, restore_safety
from agentloop.engine.replay_marks import mark_replays
from agentloop.engine.state import RunState
from agentloop.errors import InvalidInput
from agentloop.messages import Message
from agentloop.store._session import SessionRecorder, continuable, restore

__all__ = ["reopen", "restore_safety"]


def reopen(session: Conversation[Any], deps: Any, cancels: tuple[CancelToken, ...]) -> RunState:
    """The crashed run's state, its lease taken and its closure undone in the store."""
    recorder = session._recorder
    if recorder is None or recorder.durable is None or session._journal is None:
        raise InvalidInput(
            "continue_run() needs an agent with a store: "
            "Agent.resume(session_id, store=..., client=...)"
        )
    if session._active is not None:
        raise InvalidInput(f"session {session.id!r} is already running")
    recorder.claim()
    try:
        return _reopen(session, recorder, session._journal, deps, cancels)
    except BaseException:
        recorder.release()
        raise


def _reopen(
    session: Conversation[Any],
    recorder: SessionRecorder,
    journal: Journal,
    deps: Any,
    cancels: tuple[CancelToken, ...],
) -> RunState:
    store = recorder.store
    closes = closing(session.agent)  # a filtered receiver's view ends (engine.handoffs)
    history, runs = restore(store, session.id, owner=recorder.owner, closing=closes)  # ours now
    stored = continuable(store, session.id)
    if stored is None:
        raise InvalidInput(
            f"session {session.id!r} has no run to continue: its last run ended "
            "(only a run its process never finalized can be continued)"
        )
    run = runs[-1]
    inside = _receiver(session, run)  # a crash inside a handoff receiver goes on in it (26)
    keep = len(history) - (len(run.messages) - stored.absorbed)
    session._history = history[:keep]
    session._set_runs(runs)
    run.stop_reason, run.output, run.ended_at = None, None, None
    transcript = list(history) if run.turns else [*history, Message.from_input(run.input)]
    recorder.reopened(run, keep=keep)
    journal.start(run.id, recorder.durable.load_steps(run.id) if recorder.durable else {})
    mark_replays(session, journal, run.id)  # what the journal answers is told as replayed
    restore_safety(session, store, continuing=run)
    session.safety.continue_run(run)
    state = session._new_state(run, transcript, keep, deps, cancels)
    state.audit = list(run.messages) if run.turns else transcript[keep:]
    state.turn_index = len(run.turns)
    if state.turn_index and state.settings.tool_choice_once:
        state.release_tool_choice()  # the run's first turn is behind it: no forcing again
    if inside is not None:
        from agentloop.engine.handoffs import resume_in

        run.last_agent = inside
        resume_in(session, state, {})
    state.complete_turn()
    session._bus.turn = state.turn_index
    return state


def _receiver(session: Conversation[Any], run: Any) -> str | None:
    """The handoff receiver the crashed run was in (None: the session's agent)."""
    if not getattr(session.agent, "_handoffs", ()):
        return None
    from agentloop.engine.handoff_carry import crashed_in

    name, filtered = crashed_in(session.agent, run)
    if filtered:
        raise InvalidInput(
            f"run {run.id} crashed inside handoff receiver '{name}', reached through a handoff "
            "with an input_filter: the receiver's filtered transcript is kept with a pause, "
            "not a crash, and continuing would show it what the filter hid; it stays closed "
            "as resuming closed it (its completed turns committed): run the request again"
        )
    return name
