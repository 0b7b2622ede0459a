"""Abandoning a paused or waiting run (SPEC 17's ``cancel_run``): finalized as ``Cancelled``.

A run paused on pending calls (SPEC 17) or waiting on a provider batch (SPEC 25) holds no task: it
is a record. ``cancel_run`` ends it through the run's own finalize (``RunLoop.finalize``), so it
ends as every hard ending does: ``stop_reason`` ``Cancelled``, the run record and the history
written in one store transaction (status ``failed``, its error ``Cancelled``), the hooks'
``on_run_end``, then ``RunFinished``. What commits is SPEC 5's cancel case: the completed turns
(committed already at the pause) stay; the paused turn is dropped from the history, its pending
calls never run (the run's messages close them with the interrupted text, as a cancel mid-dispatch
does), and the paused turn's staged memory writes are discarded (SPEC 27).

**Reopening** follows the continue paths, without decisions: the session's lease is taken (a
store's run can be decided or polled by another process), the stored record is read again, and a
run that is no longer paused or waiting (decided, polled or cancelled meanwhile) is
``InvalidInput``. Cancelling releases the lease in the same transaction that writes the end, so
a batch poller that reads the run afterwards finds it ``cancelled``, not ``waiting``, and never
applies its result. The provider batch itself is left alone: one batch can carry other runs'
requests (``agentloop.batch.start_many``), and its result for this run is simply never claimed.

**From another process** (``agentloop runs cancel ID``): ``agentloop.engine.stored_cancel``
restores the session from the store and cancels it as above.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from agentloop.errors import Cancelled, InvalidInput
from agentloop.messages import Message

if TYPE_CHECKING:
    from agentloop.engine.conversation import Conversation
    from agentloop.engine.state import RunState
    from agentloop.run import Run

__all__ = ["cancel_paused"]


def _no_run(session_id: str) -> InvalidInput:
    return InvalidInput(
        f"session {session_id!r} has no paused or waiting run to cancel: cancel_run() ends a run "
        "paused on pending calls (run.paused) or waiting on a provider batch (run.waiting); "
        "a running run is cancelled with cancel() or a CancelToken"
    )


async def cancel_paused(session: Conversation[Any]) -> Run[Any]:
    """End ``session``'s paused or waiting run as ``Cancelled``; return the finalized run.

    Raises:
        InvalidInput: The session has no paused or waiting run (or a run in flight).
    """
    if session._active is not None:
        raise InvalidInput(
            f"session {session.id!r} is running: cancel_run() ends a paused or waiting run; "
            "cancel a running one with cancel() or a CancelToken"
        )
    last = session._latest
    if last is None or not (last.pending or last.waiting is not None):
        raise _no_run(session.id)
    state = _reopened(session, last)
    from agentloop.engine.loop import RunLoop

    await cast(RunLoop, state)._bind().finalize(Cancelled())  # the state is its run's loop
    await _cancel_children(session, state)
    return state.run


def _reopened(session: Conversation[Any], run: Run[Any]) -> RunState:
    """The run's state as a continuation would build it, the lease held, nothing decided."""
    if run.waiting is not None:
        from agentloop.engine.batching import reopen_waiting

        return reopen_waiting(session, run, None, (), applying=False)
    recorder = session._recorder
    durable = recorder.durable if recorder is not None else None
    if recorder is not None:
        recorder.claim()  # a process deciding the run at this moment holds it: a clear error
    try:
        if durable is not None:  # what the store says now: decided or cancelled elsewhere?
            from agentloop.engine.pause import _adopted

            stored = durable.load_run(run.id)
            if stored is not None:
                run = _adopted(session, run, stored.run)
        if not run.pending:
            raise _no_run(session.id)
        return _paused_state(session, run)
    except BaseException:
        if recorder is not None:
            recorder.release()
        raise


def _paused_state(session: Conversation[Any], run: Run[Any]) -> RunState:
    """The paused turn back in flight: its reply and the results of the calls that ran."""
    from agentloop.engine.pause import _state

    paused = run.paused_turn or {}
    ran = paused.get("results")
    if run.memory is not None:  # the paused turn's staged writes are dropped (SPEC 27)
        run.memory = {**run.memory, "staged": []}
    session._paused_options = None
    state = _state(session, run, {}, None, ())
    state.resuming = None
    if ran is not None:  # what ran keeps its result; the pending calls get the interrupted text
        state.audit.append(Message.from_dict(ran))
    return state


async def _cancel_children(session: Conversation[Any], state: RunState) -> None:
    """A paused child agent (``as_tool``) of the cancelled run is cancelled too."""
    children = session._children
    session._children = None
    for child in (children or {}).values():
        last = child._latest
        if last is not None and last.pending and child._active is None:
            await cancel_paused(child)
