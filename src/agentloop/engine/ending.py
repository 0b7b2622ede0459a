"""A run's end, in the steps that await nothing (``RunLoop.finalize`` awaits between them).

``finalize`` stops the guardrail check, then ``committed`` (the record, the history, SPEC 5's
four cases), the memory writes, ``closed`` (the conversation, the store, the safety state),
the run-end hooks, and ``told`` (the end events, the listener, the session's cancel signal).
Each step takes the ``RunLoop`` (untyped here: the loop imports this module), which is the
run's state too.
A run with no guardrails, memory or hooks has nothing to await at its end: ``RunLoop`` then
calls the three steps in a row, without a coroutine per step.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agentloop import events as ev
from agentloop._util.chain import grown
from agentloop._util.lazy import lazy_module
from agentloop.engine.commit import commit_run
from agentloop.engine.frames import keep_frames
from agentloop.errors import AgentLoopError
from agentloop.hooks import Hook, overrides

if TYPE_CHECKING:
    from agentloop.pausing import PendingCall

handoffs = lazy_module("agentloop.engine.handoffs")  # loaded by a run that hands off

__all__ = ["closed", "committed", "run_end_hooks", "told"]

logger = logging.getLogger("agentloop")


def committed(loop: Any, error: AgentLoopError | None) -> tuple[PendingCall, ...]:
    """The watches stopped, the record's end, the history committed; the calls it paused on."""
    session, state = loop.session, loop  # the loop is the run's state
    handle = id(loop)  # the run loop watched each token itself (``RunState.watch``)
    for token in state.tokens:
        token.unwatch(handle)
    session._active = session._watcher = None
    run = state.run
    run.ended_at = loop.clock.time()  # the agent's, kept by the loop (an agent read is slow)
    run.stop_reason = error
    if error is not None:
        run.output = None
        keep_frames(error)  # an unexpected exception's innermost frames, for the record
    paused = state.paused if error is None else ()
    commit_run(session, state, error, paused)
    if state.shown is not None and state.appendonly is not None and not paused:
        handoffs.view_ended(session, state)  # a filtered handoff's own conversation (26)
    return paused


def closed(loop: Any, error: AgentLoopError | None) -> None:
    """The run's conversation, its store record, the safety state's end, the error's summary."""
    session, run = loop.session, loop.run
    history = session._history
    link = session._link  # the conversation, shared with the runs before it (engine.kept)
    if link is not None and session._linked is history:
        link = grown(link, history)
    else:  # a new chain: the session's first run end, or another list
        link = tuple(history)  # a chain's first link: its messages alone (_util.chain)
        session._linked = history
    session._link = run._link = link  # run.conversation: a list made at its first read
    if session._recorder is not None:
        session.persistence_error = session._recorder.finished(run, history)
    session.safety.end_run()
    if error is not None and error.summary is None:
        error.summary = run.summary()


def told(loop: Any, paused: tuple[PendingCall, ...]) -> None:
    """``RunPaused``/``RunWaiting`` and ``RunFinished``; the listener goes; the signal re-arms."""
    session, state = loop.session, loop
    bus = session._bus
    if bus.active:
        run = state.run
        if paused:
            bus.emit(ev.RunPaused(run.id, state.turn_index, paused))
        if run.waiting is not None:
            bus.emit(ev.RunWaiting(run.id, state.turn_index, run.waiting))
        bus.emit(ev.RunFinished(run.id, state.turn_index, run))
    if state.listener is not None:
        bus.detach(state.listener)
    token = session._cancel  # None: nobody asked for the session's signal (made when asked)
    if token is not None and token._fired:  # the flag itself: ``cancelled`` is a property
        token.reset()


async def run_end_hooks(loop: Any) -> None:
    """Each hook's ``on_run_end``; one that raises is logged and ignored."""
    run = loop.run
    for hook in loop.agent._hooks:
        if overrides(hook, Hook, "on_run_end"):
            try:
                await hook.on_run_end(run)
            except Exception:
                logger.exception("hook %r raised in on_run_end; ignored", hook)
