"""Our events as the Vercel AI SDK's UI message chunks: pure, no I/O, one object per response.

``Chunks.feed(event)`` returns the chunks (JSON-ready dicts) an event makes, in the names and
fields of the ``ai`` package's ``uiMessageChunkSchema`` (7.x). One response is one assistant
``UIMessage``; each turn of the run is a step in it:

=====================  ==========================================================================
event                  chunks
=====================  ==========================================================================
RunStarted             ``start`` (``messageId``: a new id, or the assistant message continued),
                       then what the response tells first (``_stopped``: calls a stopped chat
                       left open)
TurnStarted            ``start-step``
ThinkingDelta          ``reasoning-start`` (once), ``reasoning-delta``
TextDelta              ``text-start`` (once), ``text-delta``
ToolCallDelta          ``tool-input-start`` (once, when the call id is known), ``tool-input-delta``
AttemptReset           ``reset-step``: the client drops the failed attempt's parts
ModelResponded         what was not streamed (reasoning, text), the open parts' ends, and
                       ``tool-input-available`` for each call with its parsed arguments
ToolCallFinished       ``tool-output-available``; a soft error ``tool-output-error`` (its
                       ``errorText`` is what the model read); a call the client denied
                       ``tool-output-denied``
PartialOutput          ``data-output`` (id ``output``: the typed answer so far, replaced in place)
RunPaused              ``tool-approval-request`` per approval call (``approvalId`` is the call
                       id); an external call stays ``input-available`` for ``addToolOutput``
TurnFinished           ``finish-step``, after the end of each ``final_result`` call the client
                       saw (the answer's calls have no tool-call events): the turn's result
                       (a run that ended first: ``INTERRUPTED_TEXT``, at ``RunFinished``)
RunFinished            a hard error: ``data-error`` (class, message, phase, ``request_sent``,
                       recoverable) then ``error``; ``Cancelled``: ``abort``; then ``finish``
                       (``stop``, ``length``, ``tool-calls`` when paused, ``error``); a
                       reply the error or cancel cut mid-stream is first ``reset-step``: the
                       client drops its half text and half call, as the history does
any other              ``data-agentloop`` (transient): the event's kind and plain fields
=====================  ==========================================================================

Events of a child agent (``path`` not empty) are not drawn: the child is its tool call in the
parent's message. Its pending calls reach the parent's ``RunPaused`` (drawn there as tool calls
of their own), and the result of one the client decided is drawn when the child runs it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import fields
from typing import Any

from agentloop.engine.output import FINAL_RESULT
from agentloop.errors import AgentLoopError, Cancelled
from agentloop.events import (
    AttemptReset,
    Event,
    ModelResponded,
    PartialOutput,
    RunFinished,
    RunPaused,
    RunStarted,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from agentloop.messages import ToolCallPart
from agentloop.transcript import INTERRUPTED_TEXT

__all__ = ["Chunk", "Chunks", "error_fields"]

Chunk = dict[str, Any]

_SILENT = (ToolCallRequested, ToolCallStarted)  # ModelResponded and the result say it all


class _Call:
    """A tool call being streamed: its id once known, and the argument text held until then."""

    __slots__ = ("held", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.held: list[str] = []


class Chunks:
    """The chunk writer of one response (one assistant ``UIMessage``)."""

    def __init__(
        self,
        message_id: str,
        *,
        answered: Iterable[str] = (),
        denied: Iterable[str] = (),
        told: Iterable[Chunk] = (),
    ) -> None:
        self.message_id = message_id
        self._told = list(told)  # said right after ``start`` (calls a stopped chat left open)
        self._answered = set(answered)  # the calls this request decides (a child's included)
        self._denied = set(denied)  # calls the client denied: their result is "denied"
        self._ids = itertools.count(1)
        self._announced: set[str] = set()  # call ids given a tool-input-start
        self._finals: set[str] = set()  # announced ``final_result`` calls, not yet answered
        self._handlers: dict[type[Event], Callable[[Any], list[Chunk]]] = {
            RunStarted: self._run_started,
            TurnStarted: self._turn_started,
            TextDelta: self._text_delta,
            ThinkingDelta: self._thinking_delta,
            ToolCallDelta: self._call_delta,
            AttemptReset: self._attempt_reset,
            ModelResponded: self._responded,
            ToolCallFinished: self._call_finished,
            PartialOutput: self._partial,
            RunPaused: self._paused,
            TurnFinished: self._turn_finished,
            RunFinished: self._run_finished,
        }
        self._new_step()

    def _new_step(self) -> None:
        self._text: str | None = None  # the open text part's id
        self._reasoning: str | None = None
        self._streamed_text = False
        self._streamed_thinking = False
        self._calls: dict[int, _Call] = {}
        self._replied = False  # the step's reply arrived whole (ModelResponded)

    def feed(self, event: Event) -> list[Chunk]:
        """The chunks ``event`` makes (often none, or one)."""
        if event.path:  # a child agent's: its pending calls come in the parent's RunPaused
            if isinstance(event, ToolCallFinished) and event.call.id in self._answered:
                return self._call_finished(event)
            return []
        handler = self._handlers.get(type(event))
        if handler is not None:
            return handler(event)
        if isinstance(event, _SILENT):
            return []
        return [{"type": "data-agentloop", "data": _plain_event(event), "transient": True}]

    # -- text and reasoning --------------------------------------------------------------------

    def _close(self) -> list[Chunk]:
        out: list[Chunk] = []
        if self._text is not None:
            out.append({"type": "text-end", "id": self._text})
            self._text = None
        if self._reasoning is not None:
            out.append({"type": "reasoning-end", "id": self._reasoning})
            self._reasoning = None
        return out

    def _text_delta(self, event: TextDelta) -> list[Chunk]:
        delta: Chunk = {"type": "text-delta", "id": self._text, "delta": event.text}
        if self._text is not None:
            return [delta]
        out = self._close()
        self._text = delta["id"] = f"text-{next(self._ids)}"
        self._streamed_text = True
        out += ({"type": "text-start", "id": self._text}, delta)
        return out

    def _thinking_delta(self, event: ThinkingDelta) -> list[Chunk]:
        delta: Chunk = {"type": "reasoning-delta", "id": self._reasoning, "delta": event.text}
        if self._reasoning is not None:
            return [delta]
        out = self._close()
        self._reasoning = delta["id"] = f"reasoning-{next(self._ids)}"
        self._streamed_thinking = True
        out += ({"type": "reasoning-start", "id": self._reasoning}, delta)
        return out

    def whole(self, kind: str, text: str) -> list[Chunk]:
        """A part that was not streamed, sent whole: start, one delta, end."""
        part_id = f"{kind}-{next(self._ids)}"
        return [
            {"type": f"{kind}-start", "id": part_id},
            {"type": f"{kind}-delta", "id": part_id, "delta": text},
            {"type": f"{kind}-end", "id": part_id},
        ]

    # -- steps and tool calls ------------------------------------------------------------------

    def _run_started(self, event: RunStarted) -> list[Chunk]:
        return [{"type": "start", "messageId": self.message_id}, *self._told]

    def _turn_started(self, event: TurnStarted) -> list[Chunk]:
        self._new_step()
        return [{"type": "start-step"}]

    def _attempt_reset(self, event: AttemptReset) -> list[Chunk]:
        self._announced.difference_update(c.id for c in self._calls.values() if c.id)
        self._new_step()
        return [{"type": "reset-step"}]

    def _call_delta(self, event: ToolCallDelta) -> list[Chunk]:
        call = self._calls.get(event.index)
        if call is not None and call.id in self._announced and event.arguments_delta:
            text = event.arguments_delta  # the common case: one more piece of a known call
            delta = {"type": "tool-input-delta", "toolCallId": call.id, "inputTextDelta": text}
            return [delta] if self._text is self._reasoning is None else [*self._close(), delta]
        out = self._close()
        if call is None:
            call = self._calls[event.index] = _Call()
        call.name = call.name or event.name
        call.id = call.id or event.call_id
        if call.id is None or call.name is None:
            call.held.append(event.arguments_delta)  # no id yet: nothing the client can place
            return out
        if call.id not in self._announced:
            out.append(self._input_start(call.id, call.name))
        text = "".join((*call.held, event.arguments_delta))
        call.held.clear()
        if text:
            out.append({"type": "tool-input-delta", "toolCallId": call.id, "inputTextDelta": text})
        return out

    def _input_start(self, call_id: str, name: str) -> Chunk:
        self._announced.add(call_id)
        if name == FINAL_RESULT:
            self._finals.add(call_id)
        return {"type": "tool-input-start", "toolCallId": call_id, "toolName": name}

    def _available(self, call: ToolCallPart) -> list[Chunk]:
        out = [] if call.id in self._announced else [self._input_start(call.id, call.name)]
        out.append(
            {
                "type": "tool-input-available",
                "toolCallId": call.id,
                "toolName": call.name,
                "input": dict(call.arguments),
            }
        )
        return out

    def _responded(self, event: ModelResponded) -> list[Chunk]:
        self._replied = True
        out = self._close()
        message = event.response.message
        if not self._streamed_thinking:
            for part in message.thinking:
                if part.text:
                    out += self.whole("reasoning", part.text)
        if not self._streamed_text and message.text:
            out += self.whole("text", message.text)
        for call in message.tool_calls:
            out += self._available(call)
        return out

    def _call_finished(self, event: ToolCallFinished) -> list[Chunk]:
        call_id, result = event.call.id, event.result
        if call_id in self._denied:
            return [{"type": "tool-output-denied", "toolCallId": call_id}]
        return _output(call_id, result.content, result.is_error)

    def _partial(self, event: PartialOutput) -> list[Chunk]:
        return [{"type": "data-output", "id": "output", "data": event.value}]

    def _paused(self, event: RunPaused) -> list[Chunk]:
        out = self._close()
        for pending in event.pending:
            if pending.call.id not in self._announced:  # a child's call: never drawn before
                out += self._available(pending.call)
            if pending.kind == "approval":
                request: Chunk = {
                    "type": "tool-approval-request",
                    "approvalId": pending.id,
                    "toolCallId": pending.id,
                }
                if pending.message:
                    request["reason"] = pending.message
                out.append(request)
        return out

    def _turn_finished(self, event: TurnFinished) -> list[Chunk]:
        out = self._close()
        if self._finals:  # the answer's calls get no events: their results are the turn's
            for result in event.turn.tool_results:
                if result.call_id in self._finals:
                    self._finals.discard(result.call_id)
                    out += _output(result.call_id, result.content, result.is_error)
        return [*out, {"type": "finish-step"}]

    def _run_finished(self, event: RunFinished) -> list[Chunk]:
        run, error = event.run, event.run.stop_reason
        cut = not self._replied and (self._streamed_text or self._streamed_thinking or self._calls)
        out = self._close()
        if error is not None and cut:  # the reply the run dropped: its parts go from the client
            self._finals.difference_update(c.id for c in self._calls.values() if c.id)
            self._new_step()
            out = [{"type": "reset-step"}]
        if not run.paused:  # a run that ended before its answer's turn did: those calls end
            for call_id in sorted(self._finals):
                out += _output(call_id, INTERRUPTED_TEXT, True)
            self._finals.clear()
        if isinstance(error, Cancelled):
            return [*out, {"type": "abort", "reason": str(error)}]
        if error is not None:
            data = error_fields(error)
            out += (
                {"type": "data-error", "data": data},
                {"type": "error", "errorText": _error_text(data)},
            )
        reason = "error" if error else "tool-calls" if run.paused else "stop"
        if reason == "stop" and run.truncated:
            reason = "length"
        out.append({"type": "finish", "finishReason": reason})
        return out


def _output(call_id: str, content: str, is_error: bool) -> list[Chunk]:
    """A call's end: ``tool-output-error`` for a soft error, else ``tool-output-available``."""
    if is_error:
        return [{"type": "tool-output-error", "toolCallId": call_id, "errorText": content}]
    return [{"type": "tool-output-available", "toolCallId": call_id, "output": content}]


def error_fields(error: AgentLoopError) -> dict[str, Any]:
    """A hard error as plain data: class, message, phase, ``request_sent``, recoverable."""
    phase = getattr(error, "phase", None)
    return {
        "class": type(error).__name__,
        "message": str(error),
        "phase": None if phase is None else str(phase),
        "request_sent": getattr(error, "request_sent", None),
        "recoverable": error.is_recoverable(),
    }


def _error_text(data: dict[str, Any]) -> str:
    text = f"{data['class']}: {data['message']}"
    if data["phase"] is not None:
        sent = {True: "yes", False: "no", None: "unknown"}[data["request_sent"]]
        text += f" (phase: {data['phase']}, request sent: {sent})"
    return text


def _plain_event(event: Event) -> dict[str, Any]:
    """An event the protocol has no part for, as its kind and its plain fields.

    ``kind`` is always the event's class; an event field of that name (``GuardrailChecked.kind``)
    travels as ``event_kind`` so it never hides which event this is.
    """
    data: dict[str, Any] = {"kind": type(event).__name__}
    for f in fields(event):
        if f.name in ("run_id", "path", "session_id"):
            continue
        value = getattr(event, f.name)
        if f.name == "agent" and value is None:
            continue  # the starting agent (SPEC 26): said only after a handoff
        if f.name == "replayed" and not value:
            continue  # a durable run's internal: said only of a call answered from the record
        if isinstance(value, BaseException):
            value = f"{type(value).__name__}: {value}"
        elif not isinstance(value, str | int | float | bool | None):
            value = str(value)
        data["event_kind" if f.name == "kind" else f.name] = value
    return data
