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
    AttemptReset                 closes what streamed and withdraws it (below); the retry
                                 streams as a new message
    ToolCallFinished             TOOL_CALL_RESULT; a soft error carries
                                 ``metadata = {"agentloop": {"error": true}}``
    TurnFinished, final_result   TOOL_CALL_RESULT of each ``final_result`` call the client saw
                                 (the answer's calls have no tool-call events): the turn's
                                 result; a run that ended first, ``INTERRUPTED_TEXT``
    PartialOutput and the rest   CUSTOM ``agentloop:<event>`` with the event's plain fields
    RunFinished, the run paused  RUN_FINISHED outcome ``interrupt``, one ``Interrupt`` a pending
                                 call (id = the call id, reason ``tool_call``)
    RunFinished, Cancelled       RUN_FINISHED outcome ``cancelled``
    RunFinished, ended well      RUN_FINISHED outcome ``success``, ``result`` = the output
    a hard error                 RUN_ERROR: ``code`` the error's class, ``message`` its text,
                                 ``metadata.agentloop``: ``error``, ``phase``, ``request_sent``,
                                 ``status_code``, ``recoverable`` (those the error has)

Every frame is the official model's, encoded by ``EventEncoder``; the frequent ones are not
rebuilt each time. A fragment (TEXT_MESSAGE_CONTENT, REASONING_MESSAGE_CONTENT, TOOL_CALL_ARGS:
most of a run's events) is put into its message's frame, encoded once around a marker; the
events of every message, call and turn (starts, ends, results) are quoted into a template of
their shape (``_ag_ui_frames``). The JSON is the encoder's, as ``json.dumps`` quotes strings
(non-ASCII as escapes); ``bench/ui_protocols.py`` has what it saves.

**A reply withdrawn.** A reply that streamed and then failed (a retry replaced it, a hard error
or a cancel cut it) is not the run's: the engine drops it from the history, and the client must
not keep it either (a half answer beside the retry's, a tool call that never ends). AG-UI has no
event that removes a message, so the withdrawal is a MESSAGES_SNAPSHOT of what the client holds
without it: the request's ``messages`` (``history``, set by the app) and the messages this run
completed (``_kept``, one small tuple a reply or result, made into models only for a snapshot).

Events of a child agent (``event.path`` not empty, an agent run as a tool) are not streamed:
the child's work reaches the client as its tool call's result. Before ``RUN_FINISHED`` every
open message, reasoning span, tool call and step is closed, as the protocol requires.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import uuid
from collections.abc import Callable
from typing import Any

from ag_ui import core
from ag_ui.encoder import EventEncoder

from agentloop import events as ev
from agentloop.engine.output import FINAL_RESULT
from agentloop.messages import ToolCallPart
from agentloop.run import Run
from agentloop.transcript import INTERRUPTED_TEXT
from agentloop.ui import _ag_ui_frames as frame
from agentloop.ui._ag_ui_frames import error_event, interrupt_of, plain, quoted

__all__ = ["AGUIEvents"]


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

    def __init__(self, thread_id: str, run_id: str, encoder: EventEncoder | None = None) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.encoder = encoder or EventEncoder()
        self.out: list[str] = []  # the SSE frames of the event being fed
        self._ids = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:16]
        self._text_frame = self._thinking_frame = ("", "")
        self._step: str | None = None
        self._reply = self._new_id()  # the assistant message of the reply being streamed
        self._text: str | None = None
        self._reasoning: tuple[str, str] | None = None  # (span id, message id)
        self._calls: dict[int, _Call] = {}
        self._arg_frames: dict[str, tuple[str, str]] = {}
        self._thought = self._said = False  # whether the reply streamed reasoning, text
        self._thought_id: str | None = None  # the reply's reasoning message
        self.history: list[core.Message] = []  # the client's messages before this run
        self._kept: list[tuple[Any, ...]] = []  # what this run completed, as the client has it
        self._finals: set[str] = set()  # started ``final_result`` calls, not yet answered
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

    def feed(self, event: ev.Event) -> str:
        """The SSE text of the AG-UI events ``event`` becomes ("" when none)."""
        if event.path:
            return ""
        kind = type(event)
        if kind is ev.TextDelta and self._text is not None:  # the hot paths: one fragment
            before, after = self._text_frame
            text = event.text  # type: ignore[attr-defined]
            return before + quoted(text) + after if text else ""
        if kind is ev.ThinkingDelta and self._reasoning is not None:
            before, after = self._thinking_frame
            text = event.text  # type: ignore[attr-defined]
            return before + quoted(text) + after if text else ""
        if kind is ev.ToolCallDelta:
            call = self._calls.get(event.index)  # type: ignore[attr-defined]
            delta = event.arguments_delta  # type: ignore[attr-defined]
            if call is not None and call.id is not None and delta and not call.held:
                before, after = self._arg_frames[call.id]
                return before + quoted(delta) + after
        self.out = []
        self._handlers.get(kind, self._custom)(event)
        return "".join(self.out)

    def finish(self, run: Run[Any]) -> str:
        """Close the AG-UI run for a finished (or paused, or cancelled) agentloop run."""
        self.out = []
        error = run.stop_reason
        if error is not None and not error.is_cancelled():
            return self.fail(error)
        self._withdraw()  # a cancel that cut a reply: the client drops it, as the history does
        self._close_all()
        if not run.paused:
            self._end_finals()
        if run.paused:
            interrupts = [interrupt_of(p) for p in run.pending]
            outcome: Any = core.RunFinishedInterruptOutcome(interrupts=interrupts)
            result = None
        elif error is not None:
            outcome, result = core.RunFinishedCancelledOutcome(), None
        elif isinstance(run.output, str):  # the common end: a text answer
            self.out.append(frame.RUN_SUCCESS(self.thread_id, self.run_id, run.output))
            return "".join(self.out)
        else:
            outcome, result = core.RunFinishedSuccessOutcome(), plain(run.output)
        self._emit(
            core.RunFinishedEvent(
                thread_id=self.thread_id, run_id=self.run_id, result=result, outcome=outcome
            )
        )
        return "".join(self.out)

    def fail(self, error: BaseException) -> str:
        """RUN_ERROR for a hard error (or one that ended the run without its ``RunFinished``)."""
        return self.withdrawn() + self.encoder.encode(error_event(error))

    def withdrawn(self) -> str:
        """The frames that withdraw a reply cut mid-stream ("" when none is in flight)."""
        self.out = []
        self._withdraw()
        self._close_all()
        self._end_finals()
        return "".join(self.out)

    def _new_id(self) -> str:
        """A message id: unique in the thread (a random prefix per run, then a count)."""
        return f"{self._prefix}-{next(self._ids)}"

    def _emit(self, event: core.BaseEvent) -> None:
        self.out.append(self.encoder.encode(event))

    # -- the handlers ------------------------------------------------------------------------

    def _on_turn(self, event: ev.TurnStarted) -> None:
        self._end_step()
        self._step = f"turn {event.turn}"
        self.out.append(frame.STEP_STARTED(self._step))

    def _on_turn_finished(self, event: ev.TurnFinished) -> None:
        self._close_reply()
        if self._finals:  # the answer's calls get no events: their results are the turn's
            for result in event.turn.tool_results:
                if result.call_id in self._finals:
                    self._finals.discard(result.call_id)
                    self._result(result.call_id, result.content, result.is_error)
        self._end_step()

    def _on_thinking(self, event: ev.ThinkingDelta) -> None:
        if not event.text:
            return
        if self._reasoning is None:
            self._open_reasoning()
            self._thought = True
        before, after = self._thinking_frame
        self.out.append(before + quoted(event.text) + after)

    def _on_text(self, event: ev.TextDelta) -> None:
        if not event.text:
            return
        if self._text is None:
            self._open_text()
            self._said = True
        before, after = self._text_frame
        self.out.append(before + quoted(event.text) + after)

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
        if message.tool_calls:
            self._send_unstreamed(message.tool_calls)
        thought = "".join(p.text for p in message.thinking) if self._thought else None
        self._keep(thought, message.text if self._said else None, message.tool_calls)
        self._close_reply()

    def _send_unstreamed(self, calls: tuple[ToolCallPart, ...]) -> None:
        """Send whole each call that never streamed under its id (or was never named).

        Matched by id, not position: a stream's index is the provider's (Claude numbers content
        blocks, so a call after text is block 1), not the call's place among the reply's calls.
        """
        streamed = {call.id for call in self._calls.values() if call.id is not None}
        for part in calls:
            if part.id not in streamed:
                call = self._calls[-1 - len(self._calls)] = _Call()  # a key no stream index has
                call.id = part.id
                self._start_call(part.id, part.name)
                self._args(part.id, json.dumps(plain(part.arguments)))

    def _keep(
        self, thinking: str | None, text: str | None, calls: tuple[ToolCallPart, ...]
    ) -> None:
        """Remember the reply being closed as the client holds it (for a later withdrawal)."""
        if thinking is not None and self._thought_id is not None:
            self._kept.append(("reasoning", self._thought_id, thinking))
        if text is not None or calls:
            self._kept.append(("assistant", self._reply, text, calls))

    def _on_reset(self, event: ev.AttemptReset) -> None:
        self._withdraw()
        self._close_reply()

    def _withdraw(self) -> None:
        """Close a reply in flight and send the client's messages without it (a snapshot)."""
        if not (self._said or self._thought or any(c.id for c in self._calls.values())):
            return
        self._finals.difference_update(c.id for c in self._calls.values() if c.id)
        self._close_reply()
        messages = [*self.history, *map(_message, self._kept)]
        self._emit(core.MessagesSnapshotEvent(messages=messages))

    def _on_result(self, event: ev.ToolCallFinished) -> None:
        result = event.result
        self._result(result.call_id, result.content, result.is_error)

    def _result(self, call_id: str, content: str, is_error: bool) -> None:
        message_id = self._new_id()
        self._kept.append(("tool", message_id, call_id, content, is_error))
        self.out.append(
            (frame.TOOL_ERROR if is_error else frame.TOOL_RESULT)(message_id, call_id, content)
        )

    def _custom(self, event: ev.Event) -> None:
        name = type(event).__name__
        value = {
            f.name: plain(getattr(event, f.name))
            for f in dataclasses.fields(event)
            if f.name not in ("run_id", "path", "session_id")
            and (f.name != "agent" or event.agent is not None)  # said only after a handoff
            and (f.name != "replayed" or getattr(event, "replayed", False))  # when it is True
        }
        self._emit(core.CustomEvent(name=f"agentloop:{name}", value=value))

    # -- opening and closing -----------------------------------------------------------------

    def _open_reasoning(self) -> None:
        span, message_id = self._new_id(), self._new_id()
        self._reasoning = (span, message_id)
        self._thought_id = message_id
        self.out.append(frame.REASONING_START(span))
        self.out.append(frame.REASONING_MESSAGE_START(message_id))
        self._thinking_frame = frame.REASONING_CONTENT.around(message_id)

    def _open_text(self) -> None:
        self._close_reasoning()
        self._text = self._reply
        self.out.append(frame.TEXT_START(self._text))
        self._text_frame = frame.TEXT_CONTENT.around(self._text)

    def _start_call(self, call_id: str, name: str) -> None:
        if name == FINAL_RESULT:
            self._finals.add(call_id)
        self._close_reasoning()
        self._close_text()
        self.out.append(frame.TOOL_START(call_id, name, self._reply))
        self._arg_frames[call_id] = frame.TOOL_ARGS.around(call_id)

    def _args(self, call_id: str, delta: str) -> None:
        before, after = self._arg_frames[call_id]
        self.out.append(before + quoted(delta) + after)

    def _close_reasoning(self) -> None:
        if self._reasoning is not None:
            span, message_id = self._reasoning
            self._reasoning = None
            self.out.append(frame.REASONING_MESSAGE_END(message_id))
            self.out.append(frame.REASONING_END(span))

    def _close_text(self) -> None:
        if self._text is not None:
            self.out.append(frame.TEXT_END(self._text))
            self._text = None

    def _close_reply(self) -> None:
        """End the reply: its reasoning, text and calls; the next reply is a new message."""
        self._close_reasoning()
        self._close_text()
        for call in self._calls.values():
            if call.id is not None and not call.ended:
                call.ended = True
                self.out.append(frame.TOOL_END(call.id))
        self._calls = {}
        self._arg_frames = {}
        self._thought = self._said = False
        self._thought_id = None
        self._reply = self._new_id()

    def _end_step(self) -> None:
        if self._step is not None:
            self.out.append(frame.STEP_FINISHED(self._step))
            self._step = None

    def _close_all(self) -> None:
        self._close_reply()
        self._end_step()

    def _end_finals(self) -> None:
        """A run that ended before its answer's turn did: its ``final_result`` calls end too."""
        for call_id in sorted(self._finals):
            self._result(call_id, INTERRUPTED_TEXT, True)
        self._finals.clear()


def _message(kept: tuple[Any, ...]) -> core.Message:
    """A message this run completed, as the client's ``messages`` holds it."""
    role, message_id, *rest = kept
    if role == "reasoning":
        return core.ReasoningMessage(id=message_id, content=rest[0])
    if role == "tool":
        call_id, content, is_error = rest
        metadata = {"agentloop": {"error": True}} if is_error else None
        return core.ToolMessage(
            id=message_id, tool_call_id=call_id, content=content, metadata=metadata
        )
    text, calls = rest
    tool_calls = [
        core.ToolCall(
            id=c.id,
            type="function",
            function=core.FunctionCall(name=c.name, arguments=json.dumps(plain(c.arguments))),
        )
        for c in calls
    ]
    return core.AssistantMessage(id=message_id, content=text, tool_calls=tool_calls or None)


def _ignore(event: ev.Event) -> None:
    """Events the protocol has no place for, or that another event already carries."""
