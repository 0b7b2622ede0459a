"""Picking a stored session back up: its safety state, and the run a crash cut off.

``restore_safety`` puts back what ``SafetyState.snapshot`` stored at the last commit point
(``Agent.resume`` and ``continue_run``). ``reopen`` rebuilds the state of the run its process
never finalized, from its last completed turn, with the session's lease taken: the engine then
drives it like any run, the journal answering for what already happened
(``agentloop.engine.journal``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentloop.cancel import CancelToken
from agentloop.engine.state import RunState
from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.messages import Message
from agentloop.run import Run
from agentloop.store import Store
from agentloop.store._session import SessionRecorder, continuable, load_safety, restore

if TYPE_CHECKING:
    from agentloop.engine.agent import Agent
    from agentloop.engine.journal import Journal

__all__ = ["reopen", "restore_safety"]


def restore_safety(agent: Agent[Any], store: Store, *, continuing: Run[Any] | None) -> None:
    """Put back the stored safety state; a resumed agent drops unfired stop patterns."""
    data = load_safety(store, agent.session_id)
    if data is None:
        return
    try:
        agent.safety.restore(data, agent.client, continuing=continuing)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MemoryBackendError(
            f"session {agent.session_id!r}: the stored safety state is unreadable: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if continuing is None:
        agent.safety.end_run()


def reopen(agent: Agent[Any], deps: Any, cancels: tuple[CancelToken, ...]) -> RunState:
    """The crashed run's state, its lease taken and its closure undone in the store."""
    recorder = agent._recorder
    if recorder is None or recorder.durable is None or agent._journal is None:
        raise InvalidInput(
            "continue_run() needs an agent with a store: "
            "Agent.resume(session_id, store=..., client=...)"
        )
    if agent._active is not None:
        raise InvalidInput("this Agent is already running")
    recorder.claim()
    try:
        return _reopen(agent, recorder, agent._journal, deps, cancels)
    except BaseException:
        recorder.release()
        raise


def _reopen(
    agent: Agent[Any],
    recorder: SessionRecorder,
    journal: Journal,
    deps: Any,
    cancels: tuple[CancelToken, ...],
) -> RunState:
    store = recorder.store
    stored = continuable(store, agent.session_id)
    if stored is None:
        raise InvalidInput(
            f"session {agent.session_id!r} has no run to continue: its last run ended "
            "(only a run its process never finalized can be continued)"
        )
    history, runs = restore(store, agent.session_id)
    run = runs[-1]
    keep = len(history) - (len(run.messages) - stored.absorbed)
    agent._history, agent._runs = history[:keep], runs
    run.stop_reason, run.output, run.ended_at = None, None, None
    transcript = list(history) if run.turns else [*history, Message.user(run.input)]
    recorder.reopened(run, keep=keep)
    journal.start(run.id, recorder.durable.load_steps(run.id) if recorder.durable else {})
    restore_safety(agent, store, continuing=run)
    agent.safety.limits.continue_run(run)
    state = agent._new_state(run, transcript, keep, deps, cancels)
    state.audit = list(run.messages) if run.turns else transcript[keep:]
    state.turn_index = len(run.turns)
    state.complete_turn()
    agent._bus.turn = state.turn_index
    return state
