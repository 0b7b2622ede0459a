"""Picking a stored session back up: its safety state, and the run a crash cut off.

``restore_safety`` puts back what ``SafetyState.snapshot`` stored at the last commit point
(``Agent.resume`` and ``continue_run``). ``reopen`` rebuilds the state of the run its process
never finalized, from its last completed turn, with the session's lease taken: the engine then
drives it like any run, the journal answering for what already happened
(``agentloop.engine.journal``).
"""

from __future__ import annotations

from typing import Any, cast

from agentloop.cancel import CancelToken
from agentloop.engine.conversation import Conversation
from agentloop.engine.journal import Journal
from agentloop.engine.state import RunState
from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.messages import Message
from agentloop.run import Run
from agentloop.store import Store
from agentloop.store._session import SessionRecorder, continuable, load_safety, restore

__all__ = ["refreshed", "reopen", "restore_safety"]


def refreshed(session: Conversation[Any]) -> None:
    """Reload ``session`` from its store: another process (or agent) ran it since.

    A web app's workers share the store and each keeps its live ``Session``: the run about to
    start must send, and its end append to, what the store holds, not the cached history. The
    history, the runs and the session's own safety state come back as ``agent.session(id)``
    restores them (the agent's shared breakers and model health stay as they are).
    """
    recorder = session._recorder
    assert recorder is not None
    history, runs = restore(recorder.store, session.id, owner=recorder.owner)
    session._history, session._runs = history, cast(Any, runs)
    session._measured = None
    session._drop_block = any(r.thinking_prefix_mismatch for r in runs)
    recorder.reloaded(len(history))
    restore_safety(session, recorder.store, continuing=None, shared=False)


def restore_safety(
    session: Conversation[Any],
    store: Store,
    *,
    continuing: Run[Any] | None,
    shared: bool = True,
) -> None:
    """Put back the stored safety state; a resumed session drops unfired stop patterns.

    ``shared=False`` (a session restored on a live agent) leaves the agent's tool breakers and
    model health as its other sessions made them.
    """
    data = load_safety(store, session.id)
    if data is None:
        return
    try:
        session.safety.restore(data, session.agent.client, continuing=continuing, shared=shared)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MemoryBackendError(
            f"session {session.id!r}: the stored safety state is unreadable: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if data.get("drop_block") is True:  # SPEC 28's escape hatch, stored with the session
        session._drop_block = True
    if continuing is None:
        session.safety.end_run()


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
    history, runs = restore(store, session.id, owner=recorder.owner)  # the lease is ours now
    stored = continuable(store, session.id)
    if stored is None:
        raise InvalidInput(
            f"session {session.id!r} has no run to continue: its last run ended "
            "(only a run its process never finalized can be continued)"
        )
    run = runs[-1]
    keep = len(history) - (len(run.messages) - stored.absorbed)
    session._history, session._runs = history[:keep], runs
    run.stop_reason, run.output, run.ended_at = None, None, None
    transcript = list(history) if run.turns else [*history, Message.from_input(run.input)]
    recorder.reopened(run, keep=keep)
    journal.start(run.id, recorder.durable.load_steps(run.id) if recorder.durable else {})
    restore_safety(session, store, continuing=run)
    session.safety.limits.continue_run(run)
    state = session._new_state(run, transcript, keep, deps, cancels)
    state.audit = list(run.messages) if run.turns else transcript[keep:]
    state.turn_index = len(run.turns)
    if state.turn_index and state.settings.tool_choice_once:
        state.release_tool_choice()  # the run's first turn is behind it: no forcing again
    state.complete_turn()
    session._bus.turn = state.turn_index
    return state
