"""A turn's tool calls: the step after a reply that asks for some (``RunLoop``'s base).

``CallStep`` is ``ModelStep`` with the calls step's methods and no slot of its own: the run's
loop (``agentloop.engine.loop``) is both. The common turn's lone call to a tool that never
waits is answered without a coroutine (``_dispatched``); any other turn's calls are awaited
in ``_dispatch``, through the session's dispatcher (``agentloop.engine.dispatch``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from types import CoroutineType, MappingProxyType
from typing import TYPE_CHECKING, Any

from agentloop.engine.call import pending_of
from agentloop.engine.model_step import ModelStep
from agentloop.engine.output import cut_calls
from agentloop.engine.state import Paused
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import ModelResponse
from agentloop.run import TRUNCATION_REASONS, Turn

if TYPE_CHECKING:
    from agentloop.engine.call import PausedChild
    from agentloop.pausing import PendingCall

__all__ = ["CallStep"]

_NONE: Mapping[str, str] = MappingProxyType({})


class CallStep(ModelStep):
    """The calls step of ``RunLoop``: a reply's tool calls run, their results appended."""

    __slots__ = ()

    def _dispatched(
        self, turn: Turn, response: ModelResponse, calls: Sequence[ToolCallPart]
    ) -> bool | Awaitable[None]:
        """The reply's calls run; the common turn's, without a coroutine (else what awaits).

        A lone call that never waits ends here (``_dispatch``'s steps written out).
        """
        if response.stop_reason in TRUNCATION_REASONS:
            return self._dispatch(turn, calls, answered=cut_calls(response))
        lone = None
        if self.guarding is None and len(calls) == 1:
            lone = self.session._dispatcher.lone(self, calls, _NONE, _NONE)
        if lone is None:
            return self._dispatch(turn, calls)
        ran = lone.now()  # a tool that never waits: its answer without a coroutine
        if type(ran) is CoroutineType:
            return self._lone_awaited(turn, ran)
        self._lone_answered(turn, ran)
        return False

    async def _lone_awaited(self, turn: Turn, ran: Awaitable[Any]) -> None:
        """``_dispatched``'s lone call when it waits: awaited, then the turn's answer."""
        self._lone_answered(turn, await ran)

    def _lone_answered(self, turn: Turn, answer: Any) -> None:
        """The lone call's answer: its result appended, or the run paused on it (SPEC 17)."""
        if type(answer) is not ToolResultPart and not isinstance(answer, ToolResultPart):
            self.paused = pending_of([answer])  # the call left pending
            turn.tool_results = []
            raise Paused
        turn.tool_results = [answer]
        self.append(Message("tool", (answer,)))

    async def _dispatch(
        self,
        turn: Turn,
        calls: Sequence[ToolCallPart],
        *,
        answered: Mapping[str, str] = _NONE,
        finals: Mapping[str, str] = _NONE,
    ) -> None:
        """Run the turn's tool calls; a call in ``answered`` or ``finals`` (by id) gets that text.

        ``finals``: the typed answer's ``final_result`` calls, answered without tool-call events.
        """
        dispatcher, guarding = self.session._dispatcher, self.guarding
        if guarding is not None:
            guarding.release()  # not the answer: what the reply streamed goes out now
        lone = dispatcher.lone(self, calls, answered, finals)  # the common turn: one call
        if lone is not None:
            ran = lone.now()  # a tool that never waits: its answer without a coroutine
            answers: list[ToolResultPart | PendingCall | PausedChild] = [
                await ran if type(ran) is CoroutineType else ran  # type: ignore[list-item]
            ]
        else:
            answers = await dispatcher.dispatch_turn(self, calls, answered=answered, quiet=finals)
        for answer in answers:  # (the exact type first: no call)
            if type(answer) is not ToolResultPart and not isinstance(answer, ToolResultPart):
                self.paused = pending_of(answers)  # a call left pending (SPEC 17)
                turn.tool_results = [r for r in answers if isinstance(r, ToolResultPart)]
                raise Paused
        results: list[ToolResultPart] = answers  # type: ignore[assignment]  # all results
        if guarding is not None and guarding.guardrails.screens:
            await guarding.screen(calls, results, skip=answered.keys() | finals.keys())
        turn.tool_results = results
        self.append(Message("tool", tuple(results)))  # Message.tool_results, one call fewer
