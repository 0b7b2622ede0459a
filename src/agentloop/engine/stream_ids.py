"""Tool-call ids unique in the run, from the first event that names a call.

A reply's call ids are made unique in the run by ``unique_ids`` (from ``turn.checked_reply``):
a provider that numbers its calls afresh each turn (``call_0`` every time) or sends one id
twice. That happens when the reply is whole; a streamed call reached the events earlier, under
the provider's id, so a UI started it under an id whose result never came (the result carried
the new id). ``StreamIds`` gives a call its new id when the stream first names it, and
``StreamIds.restamped`` gives the whole reply the same ids, which ``unique_ids`` then keeps. An
``attempt_reset`` starts over: the retry's calls are a new reply.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from agentloop.clock import Clock
from agentloop.messages import Message, ToolCallPart
from agentloop.model import ModelResponse, StreamEvent

if TYPE_CHECKING:
    from agentloop.engine.measured import CallIds
    from agentloop.engine.state import RunState

__all__ = ["StreamIds", "unique_ids"]


class StreamIds:
    """The ids of one streamed reply's calls, as the stream named them and as the run has them."""

    __slots__ = ("_clock", "_lanes", "_named", "_taken")

    def __init__(self, taken: CallIds, clock: Clock) -> None:
        self._taken, self._clock = taken, clock
        self._lanes: dict[int, str] = {}  # stream index -> the id the events carry
        self._named: list[tuple[str, str]] = []  # (the provider's id, the events' id), in order

    def stamped(self, event: StreamEvent) -> StreamEvent:
        """``event`` (a ``tool_call_delta`` naming an id) under the id the run gives its call."""
        own = self._lanes.get(event.index)
        if own is None:
            if not event.call_id:  # not named yet: a UI holds it until it is
                return event
            given = event.call_id
            clash = given in self._taken or any(given == ours for _, ours in self._named)
            own = f"call_{self._clock.new_id()[:12]}" if clash else given
            self._lanes[event.index] = own
            self._named.append((given, own))
        return event if own == event.call_id else replace(event, call_id=own)

    def reset(self) -> None:
        """A retry started: its calls are a new reply's."""
        self._lanes.clear()
        self._named.clear()

    def restamped(self, response: ModelResponse) -> ModelResponse:
        """``response`` with each call the stream renamed under its streamed id, in order."""
        if all(given == own for given, own in self._named):
            return response
        if not isinstance(response, ModelResponse) or not isinstance(response.message, Message):
            return response  # not a reply: ``checked_reply`` refuses it
        named, parts = list(self._named), []
        for part in response.message.parts:
            if isinstance(part, ToolCallPart):
                # the n-th call with an id is the n-th the stream named with it
                pair = next((p for p in named if p[0] == part.id), None)
                if pair is not None:
                    named.remove(pair)
                    part = ToolCallPart(pair[1], part.name, part.arguments)
            parts.append(part)
        message = Message("assistant", tuple(parts), phase=response.message.phase)
        return replace(response, message=message)


def unique_ids(
    response: ModelResponse, calls: tuple[ToolCallPart, ...], state: RunState, clock: Clock
) -> ModelResponse:
    """The reply with call ids unique in the run, each added to ``state.call_ids``.

    The run's set of ids is made with its first call (``RunState.call_ids``).
    """
    seen = state.call_ids
    if not isinstance(seen, set):  # ``NO_CALL_IDS``: the run's first call
        seen = state.call_ids = set()
    ids = {c.id for c in calls}
    if "" in ids or len(ids) != len(calls) or not ids.isdisjoint(seen):
        response = replace(response, message=_restamped(response.message, seen, clock))
        ids = {c.id for c in response.message.tool_calls}
    seen.update(ids)
    return response


def _restamped(message: Message, taken: set[str], clock: Clock) -> Message:
    """``message`` with each call whose id is empty or taken under a fresh one."""
    seen = set(taken)
    parts = []
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            if not part.id or part.id in seen:
                part = ToolCallPart(f"call_{clock.new_id()[:12]}", part.name, part.arguments)
            seen.add(part.id)
        parts.append(part)
    return Message("assistant", tuple(parts), phase=message.phase)
