"""AG-UI events from a run's events: the pure half of ``AGUIApp`` (no I/O, no Starlette).

``AGUIEvents`` is fed the events of one agentloop run in order (``feed``) and gives back the
AG-UI 1.0 events each becomes (the official ``ag_ui.core`` models); ``finish(run)`` or
``fail(error)`` closes the AG-UI run. The table::

    TurnStarted / TurnFinished   STEP_STARTED / STEP_FINISHED  (step "turn <n>")
    ThinkingDelta                REASONING_START, REASONING_MESSAGE_START (once a reply),
                                 REASONING_MESSAGE_CONTENT
    TextDelta                    TEXT_MESSAGE_START (once a reply), TEXT_MESSAGE_CONTENT
    ToolCallDelta                TOOL_CALL_START (first fragment of a call), TOOL_CALL_ARGS;
                                 a call's fragments wait until the provider has named its id
    ModelResponded               closes what streamed (..._END); what did not stream (a client
                                 that answered whole) is sent whole here, in the same order
    AttemptReset                 closes what streamed; the retry streams as a new message
    ToolCallFinished             TOOL_CALL_RESULT; a soft error carries
                                 ``metadata = {"agentloop": {"error": true}}``
    PartialOutput and the rest   CUSTOM ``agentloop:<event>`` with the event's plain fields
    RunFinished, the run paused  RUN_FINISHED outcome ``interrupt``, one ``Interrupt`` a pending
                                 call (id = the call id, reason ``tool_call``)
    RunFinished, Cancelled       RUN_FINISHED outcome ``cancelled``
    RunFinished, ended well      RUN_FINISHED outcome ``success``, ``result`` = the output
    a hard error                 RUN_ERROR: ``code`` the error's class, ``message`` its text,
                                 ``metadata.agentloop``: ``error``, ``phase``, ``request_sent``,
                                 ``status_code``, ``recoverable`` (those the error has)

Events of a child agent (``event.path`` not empty, an agent run as a tool) are not streamed:
the child's work reaches the client as its tool call's result. Before ``RUN_FINISHED`` every
open message, reasoning span, tool call and step is closed, as the protocol requires.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable
from typing import Any

import pydantic_core
from ag_ui import core

from agentloop import events as ev
from agentloop.errors import AgentLoopError
from agentloop.pausing import PendingCall
from agentloop.run import Run

__all__ = ["AGUIEvents", "error_event", "interrupt_of"]

_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": {"type": "object", "description": "Full replacement of the arguments."},
        "message": {"type": "string", "description": "Why, when denied (the model reads it)."},
    },
    "required": ["approved"],
}
_EXTERNAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {"description": "The call's result (text, or a value made into text)."},
        "approved": {"type": "boolean", "description": "false denies the call."},
        "message": {"type": "string"},
    },
}


def _new_id() -> str:
    return uuid.uuid4().hex


def _plain(value: Any) -> Any:
    return pydantic_core.to_jsonable_python(value, fallback=str)


def interrupt_of(pending: PendingCall) -> core.Interrupt:
    """The AG-UI interrupt of a pending call: its id is the call's id."""
    call = pending.call
    if pending.message:
        message = pending.message
    elif pending.kind == "approval":
        message = f"Allow the call to '{call.name}'?"
    else:
        message = f"The call to '{call.name}' waits for its result."
    info = {"kind": pending.kind, "tool": call.name, "arguments": _plain(call.arguments)}
    if pending.path:
        info["path"] = list(pending.path)
    return core.Interrupt(
        id=call.id,
        reason="tool_call",
        message=message,
        tool_call_id=None if pending.path else call.id,  # a child's call never streamed
        response_schema=_APPROVAL_SCHEMA if pending.kind == "approval" else _EXTERNAL_SCHEMA,
        metadata={"agentloop": info},
    )


def error_event(error: BaseException) -> core.RunErrorEvent:
    """RUN_ERROR for a hard error: its class as ``code``, its facts in ``metadata``."""
    info: dict[str, Any] = {"error": type(error).__name__}
    for name in ("phase", "request_sent", "status_code"):
        value = getattr(error, name, None)
        if value is not None:
            info[name] = _plain(value)
    if isinstance(error, AgentLoopError):
        info["recoverable"] = error.is_recoverable()
    return core.RunErrorEvent(
        message=str(error) or type(error).__name__,
        code=type(error).__name__,
        metadata={"agentloop": info},
    )


class _Call:
    """A tool call being streamed: the client knows it once ``id`` is set and START sent."""

    __slots__ = ("ended", "held", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.held: list[str] = []
        self.ended = False


class AGUIEvents:
    """The AG-UI events of one run, made from its agentloop events (see the module's table)."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.out: list[core.BaseEvent] = []
        self._step: str | None = None
        self._reply = _new_id()  # the assistant message of the reply being streamed
        self._text: str | None = None
        self._reasoning: tuple[str, str] | None = None  # (span id, message id)
        self._calls: dict[int, _Call] = {}
        self._thought = self._said = False  # whether the reply streamed reasoning, text
        self._handlers: dict[type[ev.Event], Callable[[Any], None]] = {
            ev.TextDelta: self._on_text,
            ev.ThinkingDelta: self._on_thinking,
            ev.ToolCallDelta: self._on_call_delta,
            ev.ModelResponded: self._on_responded,
            ev.AttemptReset: self._on_reset,
            ev.ToolCallFinished: self._on_result,
            ev.TurnStarted: self._on_turn,
            ev.TurnFinished: self._on_turn_finished,
        }
        quiet: tuple[type[ev.Event], ...] = (
            ev.RunStarted,
            ev.RunFinished,
            ev.RunPaused,
            ev.ToolCallRequested,
            ev.ToolCallStarted,
        )
        for kind in quiet:
            self._handlers[kind] = _ignore

    # -- feeding -----------------------------------------------------------------------------

    def feed(self, event: ev.Event) -> list[core.BaseEvent]:
        """The AG-UI events ``event`` becomes (often none, or one); collected in ``out`` too."""
        out = self.out = []
        if event.path:
            return out
        handler = self._handlers.get(type(event))
        if handler is None:
            handler = self._custom
        handler(event)
        return out

    def finish(self, run: Run[Any]) -> list[core.BaseEvent]:
        """Close the AG-UI run for a finished (or paused, or cancelled) agentloop run."""
        out = self.out = []
        error = run.stop_reason
        if error is not None and not error.is_cancelled():
            out.append(error_event(error))
            return out
        self._close_all()
        if run.paused:
            interrupts = [interrupt_of(p) for p in run.pending]
            outcome: Any = core.RunFinishedInterruptOutcome(interrupts=interrupts)
            result = None
        elif error is not None:
            outcome, result = core.RunFinishedCancelledOutcome(), None
        else:
            outcome, result = core.RunFinishedSuccessOutcome(), _plain(run.output)
        out.append(
            core.RunFinishedEvent(
                thread_id=self.thread_id, run_id=self.run_id, result=result, outcome=outcome
            )
        )
        return out

    def fail(self, error: BaseException) -> list[core.BaseEvent]:
        """RUN_ERROR for an error that ended the run without its ``RunFinished``."""
        self.out = [error_event(error)]
        return self.out

    # -- the handlers ------------------------------------------------------------------------

    def _on_turn(self, event: ev.TurnStarted) -> None:
        self._end_step()
        self._step = f"turn {event.turn}"
        self.out.append(core.StepStartedEvent(step_name=self._step))

    def _on_turn_finished(self, event: ev.TurnFinished) -> None:
        self._close_reply()
        self._end_step()

    def _on_thinking(self, event: ev.ThinkingDelta) -> None:
        if not event.text:
            return
        if self._reasoning is None:
            self._open_reasoning()
            self._thought = True
        assert self._reasoning is not None
        message_id = self._reasoning[1]
        self.out.append(core.ReasoningMessageContentEvent(message_id=message_id, delta=event.text))

    def _on_text(self, event: ev.TextDelta) -> None:
        if not event.text:
            return
        if self._text is None:
            self._open_text()
            self._said = True
        assert self._text is not None
        self.out.append(core.TextMessageContentEvent(message_id=self._text, delta=event.text))

    def _on_call_delta(self, event: ev.ToolCallDelta) -> None:
        call = self._calls.get(event.index)
        if call is None:
            call = self._calls[event.index] = _Call()
        if event.name:
            call.name = event.name
        if event.arguments_delta:
            call.held.append(event.arguments_delta)
        if call.id is None and event.call_id and call.name:
            call.id = event.call_id
            self._start_call(call.id, call.name)
        if call.id is not None and call.held:
            self._args(call.id, "".join(call.held))
            call.held.clear()

    def _on_responded(self, event: ev.ModelResponded) -> None:
        message = event.response.message
        if not self._thought:
            thinking = "".join(part.text for part in message.thinking)
            if thinking:
                self._on_thinking(ev.ThinkingDelta(event.run_id, event.turn, thinking))
        if not self._said and message.text:
            self._on_text(ev.TextDelta(event.run_id, event.turn, message.text))
        for index, part in enumerate(message.tool_calls):
            call = self._calls.get(index)
            if call is None or call.id is None:  # never streamed, or never named: send it whole
                call = self._calls[index] = _Call()
                call.id = part.id
                self._start_call(part.id, part.name)
                self._args(part.id, json.dumps(_plain(part.arguments)))
        self._close_reply()

    def _on_reset(self, event: ev.AttemptReset) -> None:
        self._close_reply()

    def _on_result(self, event: ev.ToolCallFinished) -> None:
        result = event.result
        metadata = {"agentloop": {"error": True}} if result.is_error else None
        self.out.append(
            core.ToolCallResultEvent(
                message_id=_new_id(),
                tool_call_id=result.call_id,
                content=result.content,
                role="tool",
                metadata=metadata,
            )
        )

    def _custom(self, event: ev.Event) -> None:
        name = type(event).__name__
        value = {
            f.name: _plain(getattr(event, f.name))
            for f in dataclasses.fields(event)
            if f.name not in ("run_id", "path", "session_id")
        }
        self.out.append(core.CustomEvent(name=f"agentloop:{name}", value=value))

    # -- opening and closing -----------------------------------------------------------------

    def _open_reasoning(self) -> None:
        span, message_id = _new_id(), _new_id()
        self._reasoning = (span, message_id)
        self.out.append(core.ReasoningStartEvent(message_id=span))
        self.out.append(core.ReasoningMessageStartEvent(message_id=message_id, role="reasoning"))

    def _open_text(self) -> None:
        self._close_reasoning()
        self._text = self._reply
        self.out.append(core.TextMessageStartEvent(message_id=self._text, role="assistant"))

    def _start_call(self, call_id: str, name: str) -> None:
        self._close_reasoning()
        self._close_text()
        self.out.append(
            core.ToolCallStartEvent(
                tool_call_id=call_id, tool_call_name=name, parent_message_id=self._reply
            )
        )

    def _args(self, call_id: str, delta: str) -> None:
        self.out.append(core.ToolCallArgsEvent(tool_call_id=call_id, delta=delta))

    def _close_reasoning(self) -> None:
        if self._reasoning is not None:
            span, message_id = self._reasoning
            self._reasoning = None
            self.out.append(core.ReasoningMessageEndEvent(message_id=message_id))
            self.out.append(core.ReasoningEndEvent(message_id=span))

    def _close_text(self) -> None:
        if self._text is not None:
            self.out.append(core.TextMessageEndEvent(message_id=self._text))
            self._text = None

    def _close_reply(self) -> None:
        """End the reply: its reasoning, text and calls; the next reply is a new message."""
        self._close_reasoning()
        self._close_text()
        for call in self._calls.values():
            if call.id is not None and not call.ended:
                call.ended = True
                self.out.append(core.ToolCallEndEvent(tool_call_id=call.id))
        self._calls = {}
        self._thought = self._said = False
        self._reply = _new_id()

    def _end_step(self) -> None:
        if self._step is not None:
            self.out.append(core.StepFinishedEvent(step_name=self._step))
            self._step = None

    def _close_all(self) -> None:
        self._close_reply()
        self._end_step()


def _ignore(event: ev.Event) -> None:
    """Events the protocol has no place for, or that another event already carries."""
