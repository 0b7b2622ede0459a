"""The streaming holdback of output guardrails (SPEC 19): a reply's text waits for its verdict.

With output guardrails, ``Holdback`` is the event bus's gate from the start of a model call:
every event is held, in order, until the reply is known not to be the answer (a tool call
streams in, when a tool call can only mean "not done": no ``final_result`` is offered; or the
engine dispatches the reply's calls) or the answer passed its guardrails; then the held events
go out as they came. A parallel input guardrail holds the first model call's events the same
way until the input passed. A withheld answer (rejected, tripped, or cut short by the run's
end) never goes out: its ``TextDelta``, ``PartialOutput`` and ``final_result`` ``ToolCallDelta``
events are dropped and its ``ModelResponded`` carries the placeholder of ``withheld`` instead of
the reply, in a ``WithheldResponse``: the mark a face for end users (``agentloop.ui``) reads to
show nothing of it, placeholder included (SPEC 18). Everything else held (reasoning, retries,
warnings, checks) is released.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentloop import events as ev
from agentloop.engine.output import FINAL_RESULT
from agentloop.messages import Message, TextPart, ToolCallPart
from agentloop.model import ModelResponse
from agentloop.observers import EventBus

__all__ = ["CUT_SHORT_TEXT", "WITHHELD_TEXT", "Holdback", "WithheldResponse", "withheld"]

WITHHELD_TEXT = "[answer withheld: rejected by guardrail '{name}']"
"""What stands in the transcript, the run record and the events for a rejected answer."""
CUT_SHORT_TEXT = "[reply withheld: the run ended before its guardrails passed]"
"""What an unchecked reply's ``ModelResponded`` carries when the run ended before its verdict."""


_SAID = (ev.ThinkingDelta, ev.ToolCallDelta)
_ANSWER = (ev.TextDelta, ev.PartialOutput)


class WithheldResponse(ModelResponse):
    """A withheld reply's ``ModelResponse`` in its ``ModelResponded``: the placeholder message.

    A ``ModelResponse`` in every way (observers and the store read it as one); its type says
    that the message is the engine's placeholder, not the model's words, so a UI app shows
    none of it to an end user.
    """

    __slots__ = ()


def withheld(message: Message, note: str) -> Message:
    """``message`` with its text replaced by ``note`` and its ``final_result`` arguments emptied."""
    parts: list[Any] = []
    noted = False
    for part in message.parts:
        if isinstance(part, TextPart):
            if not noted:
                parts.append(TextPart(note))
                noted = True
        elif isinstance(part, ToolCallPart) and part.name == FINAL_RESULT:
            parts.append(dataclasses.replace(part, arguments={}))
        else:
            parts.append(part)
    if not noted and not message.tool_calls:
        parts.append(TextPart(note))
    return Message(message.role, tuple(parts), phase=message.phase)


class Holdback:
    """The bus's gate while a reply may be the answer: holds events, then releases or drops.

    ``early``: a tool call means the reply is not the answer (no ``final_result`` is offered),
    so the first ``ToolCallDelta`` releases everything held.
    """

    __slots__ = ("bus", "early", "finals", "held")

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus
        self.early = False
        self.held: list[ev.Event] = []
        self.finals: set[int] = set()

    def start(self, early: bool) -> None:
        """Hold from now on (only when someone listens)."""
        if self.bus.active and self.bus.gate is None:
            self.early = early
            self.held = []
            self.finals = set()
            self.bus.gate = self

    def __call__(self, event: ev.Event) -> bool:
        """The bus's gate: True when the event is held."""
        if type(event) is ev.ToolCallDelta and event.name is not None:
            if self.early:
                self.release()
                return False
            if event.name == FINAL_RESULT:
                self.finals.add(event.index)
        self.held.append(event)
        return True

    def release(self) -> None:
        """Deliver everything held, in order, and stop holding."""
        bus = self.bus
        if bus.gate is not self:
            return
        bus.gate = None
        held, self.held = self.held, []
        for event in held:
            bus.emit(event)

    def drop(self, note: str, *, whole: bool = False) -> None:
        """Release what carries none of the reply's text; ``ModelResponded`` with ``note``.

        ``whole``: nothing the reply said goes out, its reasoning and tool calls included (the
        run ended before its checks passed).
        """
        kept: list[ev.Event] = []
        for event in self.held:
            if isinstance(event, _ANSWER) or (whole and isinstance(event, _SAID)):
                continue
            if isinstance(event, ev.ToolCallDelta) and event.index in self.finals:
                continue
            if isinstance(event, ev.ModelResponded):
                message = (
                    Message.assistant(note) if whole else withheld(event.response.message, note)
                )
                event = dataclasses.replace(event, response=_withheld_response(event, message))
            kept.append(event)
        self.held = kept
        self.release()


def _withheld_response(event: ev.ModelResponded, message: Message) -> WithheldResponse:
    """``event``'s response as a ``WithheldResponse`` whose message is ``message``."""
    response = event.response
    given = {f.name: getattr(response, f.name) for f in dataclasses.fields(response)}
    return WithheldResponse(**{**given, "message": message})
