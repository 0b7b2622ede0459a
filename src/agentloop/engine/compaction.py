"""The engine's compaction step: a pass over what is sent, when the run's guard says so.

The run's context guard (``engine.context_guard.ContextGuard``, the base class of the run's
state) keeps the estimate and the transcript checks and says when a request cannot go as it
is (``ready``). Then ``before_call`` decides (``WindowPolicy``) and runs a compaction pass
(pre-compact hooks may veto; the no-progress guard ends the run with ``CompactionStalled``; a
raising compactor is ``CompactionFailed``; a result that still does not fit is
``ContextExceeded``) and commits its result (compaction is a commit point). Overflow salvage
(a provider ``ContextLengthExceeded``: compact once, retry the turn) forces the next pass
(``ContextGuard.salvage``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agentloop import events as ev
from agentloop.context import without_old_media
from agentloop.errors import CompactionFailed, CompactionStalled, ContextExceeded
from agentloop.messages import Message

if TYPE_CHECKING:
    from agentloop.engine.state import RunState

__all__ = ["before_call"]

Commit = Callable[[list[Message]], None]


async def before_call(state: RunState, commit: Commit) -> None:
    """Compact when the policy says so; refuse anything that cannot be sent."""
    reason = state.compaction_reason()
    if reason is not None:
        await _compact(state, reason, commit)
    _sendable(state)


def _sendable(state: RunState) -> None:
    if not state.policy.fits(state.total):
        raise ContextExceeded(state.total, state.config.context_window)
    state._check_sendable()


async def _compact(state: RunState, reason: str, commit: Commit) -> None:
    """One pass over what is sent: the transcript, or a filtered handoff's view (26)."""
    state.check_cancel()
    before = state.total
    messages = state.sent()
    if not await _hooks_allow(state, messages, before):
        _no_progress(state, reason, before, before)
        return
    target = max(0, state.policy.target - state.overhead)
    counter = state.counter
    try:
        compacted = without_old_media(messages)  # old media go before old text
        if compacted is None or sum(map(counter.count_message, compacted)) > target:
            compacted = await state.config.compactor.compact(
                compacted or list(messages), target_tokens=target, counter=counter
            )
    except Exception as exc:
        error = CompactionFailed(before, state.config.context_window, cause=exc)
        state.observers.emit(ev.CompactionFailed(state.run.id, state.turn_index, error))
        raise error from exc
    if state.appendonly is not None:  # SPEC 28: entries stay, no stale thinking is sent
        from agentloop.engine.appendonly import kept_after_compaction

        compacted = kept_after_compaction(messages, compacted)
    after = state.overhead + sum(counter.count_message(m) for m in compacted)
    if after >= before or not compacted:
        _no_progress(state, reason, after, before)
        return
    if not state.policy.fits(after):
        error_ = ContextExceeded(after, state.config.context_window)
        state.observers.emit(ev.CompactionFailed(state.run.id, state.turn_index, error_))
        raise error_
    if state.shown is None:
        commit(compacted)
    else:  # the view's head now; the history keeps every message (engine.views)
        from agentloop.engine.views import compacted as view_compacted

        view_compacted(state, compacted, commit)
    state.compacted(compacted)
    state.observers.emit(ev.Compacted(state.run.id, state.turn_index, before, after))


def _no_progress(state: RunState, reason: str, after: int, before: int) -> None:
    """A pass shaved nothing: defer while a threshold pass still fits, else stop."""
    if reason == "threshold" and state.policy.fits(before):
        return
    raise CompactionStalled(after, before)


async def _hooks_allow(state: RunState, messages: Sequence[Message], estimate: int) -> bool:
    for hook in state.compact_hooks:
        if await hook.pre_compact(messages, estimate) is False:
            return False
    return True
