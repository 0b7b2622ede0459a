"""A batch run in the engine (SPEC 25): stored waiting, then continued with its result.

**Waiting.** A batch run's model call raises ``agentloop.batching.Waiting`` (its client is
``agentloop.fleet._batch_client.BatchClient``); ``call_model`` keeps the ``BatchWait`` on the
state and the loop stops there as it does for a pause. Finalize's waiting case
(``waiting_record``) commits the transcript so far and keeps on the run what continuing needs
(``run.waiting``, and in ``run.paused_turn`` the turn, the messages saved, the budget and
options). The run returns; no task, thread or process is kept.

**Continuing** (``reopen_waiting``, from ``continue_run`` when the last run waits): the
session's lease is taken, the stored run read again (a run another poller continued is not
waiting any more: ``InvalidInput``; one whose result the poller has not brought is
``InvalidInput`` naming ``agentloop.batch.poll``, nothing sent), and the state rebuilt from the
record alone, at the waiting turn. The poller (``agentloop.batch.poll``) has put the batch
result in the journal as that turn's reply (``t<turn>/reply``) while holding the lease, so the
journal's ``ReplayClient`` answers the model call with it and the journaled tools never run twice: a
poller killed mid-apply leaves the run waiting with its reply journaled, and the next one
finishes it as ``continue_run`` would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentloop.cancel import CancelToken
from agentloop.errors import InvalidInput

if TYPE_CHECKING:
    from agentloop.engine.conversation import Conversation
    from agentloop.engine.state import RunState
    from agentloop.run import Run

__all__ = ["reopen_waiting", "waiting_record"]


def waiting_record(session: Conversation[Any], state: RunState) -> None:
    """Finalize's waiting case: the transcript so far committed, what continuing needs kept."""
    from agentloop.engine.handoffs import paused_view
    from agentloop.engine.pause import _options_record

    run = state.run
    run.waiting = state.waiting
    limits = session.safety
    run.paused_turn = {
        "turns": len(run.turns),
        "turn": state.turn_index,
        "saved": len(state.audit),
        "budget": limits.budget.snapshot() if limits.budget_on else None,
        "options": _options_record(session, state),
        **(paused_view(state) if run.last_agent else {}),  # a receiver waits (SPEC 26)
    }
    session._history.extend(state.transcript[state.base :])


def reopen_waiting(
    session: Conversation[Any],
    run: Run[Any],
    deps: Any,
    cancels: tuple[CancelToken, ...],
    *,
    applying: bool = True,
) -> RunState:
    """The waiting run's state at its waiting turn, the session's lease held.

    ``applying``: to continue it with the outcome the poller brought (``InvalidInput`` without
    one); ``cancel_run`` reopens it to end it and applies nothing.
    """
    if session._active is not None:
        raise InvalidInput(f"session {session.id!r} is already running")
    recorder = session._recorder
    if recorder is None or recorder.durable is None or session._journal is None:
        raise InvalidInput("a batch run continues only with a store: Agent(..., store=...)")
    recorder.claim()
    try:
        from agentloop.engine.pause import _adopted

        stored = recorder.durable.load_run(run.id)
        if stored is not None:
            run = _adopted(session, run, stored.run)
        if run.waiting is None:
            raise InvalidInput(f"run {run.id} is not waiting on a batch (continued already)")
        if applying:
            _check_arrived(run, recorder.durable.load_steps(run.id))
        return _state(session, run, deps, cancels)
    except BaseException:
        recorder.release()
        raise


def _check_arrived(run: Run[Any], steps: Any) -> None:
    """``InvalidInput`` unless the poller brought the waiting turn's outcome (SPEC 25).

    Its reply journaled (``t<turn>/reply``), or an order for the run (an error to raise, a
    resubmission). Else nothing answers the turn but its batch: continuing would submit it
    again, or answer it synchronously, while the batch still runs.
    """
    from agentloop.fleet._batch_client import ORDERS

    orders = ORDERS.get()
    turn = int((run.paused_turn or {}).get("turn", 0))
    if (orders is not None and run.id in orders) or f"t{turn}/reply" in steps:
        return
    wait = run.waiting
    batch = wait.batch_id if wait is not None else "?"
    raise InvalidInput(
        f"run {run.id} is waiting on provider batch {batch}: agentloop.batch.poll(agent) "
        "(or 'agentloop batch poll') continues it when its result arrives; continue_run "
        "would send its turn again. Nothing was sent; cancel_run() abandons it"
    )


def _state(
    session: Conversation[Any], run: Run[Any], deps: Any, cancels: tuple[CancelToken, ...]
) -> RunState:
    from agentloop.engine.handoffs import resume_in
    from agentloop.engine.pause import _restore_options

    info = run.paused_turn or {}
    try:
        turns, turn, saved = int(info["turns"]), int(info["turn"]), int(info["saved"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"run {run.id}: its waiting record is unreadable: {exc}") from exc
    del run.turns[turns:]  # what a poller killed mid-apply saved is done again (journaled)
    del run.messages[saved:]
    session.safety.continue_run(run, info.get("budget"))
    run.waiting, run.paused_turn = None, None
    run.stop_reason, run.output, run.ended_at = None, None, None
    recorder, journal = session._recorder, session._journal
    assert recorder is not None and recorder.durable is not None and journal is not None
    recorder.continuing(run, saved)
    journal.start(run.id, recorder.durable.load_steps(run.id))
    from agentloop.engine.replay_marks import mark_replays

    mark_replays(session, journal, run.id)  # a poller killed mid-apply: its tools' outputs
    history = session._history
    state = session._new_state(run, list(history), len(history), deps, cancels)
    _restore_options(session, state, info.get("options"))
    if run.last_agent is not None:
        resume_in(session, state, info)
    state.audit = list(run.messages)
    state.turn_index = turn
    if state.turn_index and state.settings.tool_choice_once:
        state.release_tool_choice()
    session._bus.turn = turn
    return state
