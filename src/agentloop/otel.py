"""OpenTelemetry spans for runs, named by the GenAI semantic conventions (the ``otel`` extra).

``OtelObserver`` reads only the typed event channel (``on_event``), so tracing never changes a
run. The span tree of one run::

    invoke_agent {agent}         INTERNAL  gen_ai.operation.name=invoke_agent  (RunStarted)
    └── agentloop.turn           INTERNAL  agentloop.turn.index                (TurnStarted)
        ├── chat {model}         CLIENT    gen_ai.operation.name=chat          (→ ModelResponded)
        ├── guardrail {name}     INTERNAL  agentloop.guardrail.*  (GuardrailChecked; a check
        │                                  made before the first turn hangs from the run span)
        └── execute_tool {tool}  INTERNAL  gen_ai.operation.name=execute_tool, one per attempt
            └── invoke_agent {tool}        a sub-agent run (``agent.as_tool``), same shape below

``{agent}`` is ``agentloop`` for a top-level run and the tool name for a sub-agent (agents have
no name of their own). Retries, fallbacks, model switches, stream resets, loop, convergence and
budget warnings and compaction are span events on the innermost open span (chat, else turn,
else run). Errors: a soft tool error marks its ``execute_tool`` span (``error.type=tool_error``,
``agentloop.error.channel=soft``, status ERROR) and the run goes on; the hard error that ends a
run (``run.stop_reason``) marks the run span and every span it left open, ended at
``RunFinished``, with ``error.type`` (the class name), ``agentloop.error.channel=hard`` and, for
a ``ProviderError``, ``agentloop.error.phase`` and ``http.response.status_code``.

Pausing (SPEC 17): ``RunPaused`` is the run span's event ``agentloop.run.paused`` (the pending
call ids, tools and kinds) and marks the span ``agentloop.run.paused``; the pending calls' open
``execute_tool`` spans carry ``agentloop.tool.pending``. The continued run is a new run span with
the same ``agentloop.run_id`` (``agentloop.run.continued``), an ``agentloop.decision`` event per
decided call (its id, tool and the decision's kind) and the paused turn reopened under it. A paused
or waiting run ended by ``cancel_run`` is a run span of its own with the same ``agentloop.run_id``
(``agentloop.run.continued`` and ``agentloop.run.cancelled``), marked with ``Cancelled``.
A batch run's wait marks its span ``agentloop.run.waiting`` (the batch ids); each poll is a new
run span, continued. A continuation this observer saw stop links to the span that stopped; every
run span carries ``gen_ai.conversation.id`` (the session). A handoff's receiver names itself
(``gen_ai.agent.name``) on the turn, chat and tool spans it rules.

Privacy: no message text, tool argument, tool result, error message, guardrail reason or loop
pattern (it quotes arguments) reaches a span unless ``capture_content=True``; with it, the GenAI
content attributes (``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``), error messages and
``agentloop.guardrail.reason`` are recorded through ``redact_secrets``.

Durable runs (SPEC 14): a call a recovery answered from its record (``replayed`` on its event)
marks its chat, tool or guardrail span ``agentloop.replayed``; a replayed chat span carries no
``gen_ai.usage.*`` (the process that made the call counted it). The run span counts them
(``agentloop.replayed_calls``); one whose model calls were all replayed is marked too, no usage.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from agentloop import events as ev
from agentloop._otel_events import ERROR_TYPE, SPAN_EVENTS, error_attributes
from agentloop._otel_shapes import jsonable, message, message_of, text, usage_attributes
from agentloop.errors import Cancelled
from agentloop.messages import input_text
from agentloop.observers import Observer
from agentloop.safety.redact import redact_secrets
from agentloop.transcript import INTERRUPTED_TEXT

try:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("agentloop.otel needs OpenTelemetry: pip install 'agentloop[otel]'") from exc

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext, Tracer
    from opentelemetry.util.types import AttributeValue

    from agentloop.run import Run

__all__ = ["OtelObserver"]

Attributes: TypeAlias = "dict[str, AttributeValue]"

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
CHANNEL = "agentloop.error.channel"
AGENT = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
ROOT_AGENT = "agentloop"
_STOPPED_KEPT = 4096
"""How many paused or waiting runs (their paths) are remembered for a later ``cancel_run``."""
REPLAYED = "agentloop.replayed"
"""Marks a span whose call a durable run's recovery answered from its record (no usage on it)."""
SOFT_ERROR_TYPE = "tool_error"
"""``error.type`` of a soft tool error: the result carries no class, only the text."""


@dataclass(slots=True, frozen=True)
class _Stopped:
    """A paused or waiting run this observer saw end: where its span was, and the span."""

    path: tuple[str, ...]
    span: SpanContext


@dataclass(slots=True, eq=False)
class _RunSpans:
    """The open spans of one run."""

    root: Span
    path: tuple[str, ...]
    turn: Span | None = None
    turn_index: int = -1
    chat: Span | None = None
    tools: dict[str, tuple[str, Span]] = field(default_factory=dict)
    """Open tool-attempt spans by call id, with the tool's name."""
    adopted: set[str] = field(default_factory=set)
    """Call ids whose span already parents a sub-agent run."""
    waited: float = 0.0  # the chat span's agentloop.rate_limit.wait_seconds (SPEC 25)
    stopped: bool = False  # paused or waiting (RunPaused, RunWaiting): the run is not over
    calls: list[int] = field(default_factory=lambda: [0, 0])  # model calls: live, replayed

    def current(self) -> Span:
        """The innermost open span that is not a tool's (span events go here)."""
        return self.chat or self.turn or self.root


class OtelObserver(Observer):
    """Emits GenAI-convention OpenTelemetry spans for runs, turns, model and tool calls.

    Args:
        tracer: The tracer to use (default: the global provider's ``agentloop`` tracer).
        capture_content: Record messages, tool arguments, tool results and error messages
            (secrets redacted). Off by default: spans then carry names, ids, counts and
            error classes only.
    """

    def __init__(self, tracer: Tracer | None = None, *, capture_content: bool = False) -> None:
        self.tracer = tracer if tracer is not None else trace.get_tracer("agentloop")
        self.capture_content = capture_content
        self._runs: dict[str, _RunSpans] = {}
        self._stopped: dict[str, _Stopped] = {}  # paused/waiting runs, oldest first

    def on_event(self, event: ev.Event) -> None:
        """Open, annotate or close the spans ``event`` concerns."""
        if isinstance(event, ev.RunStarted):
            self._run_started(event)
            return
        spans = self._runs.get(event.run_id)
        if spans is None and type(event) is ev.RunFinished:
            self._ended_unstarted(event)
            return
        # A different path is the same run delivered twice: this observer sits on a sub-agent
        # too, which reports its events directly and through its parent (with the path).
        if spans is None or spans.path != event.path:
            return
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event, spans)
        else:
            self._span_event(event, spans)

    def _start(
        self, name: str, parent: Span | None, attributes: Attributes, kind: SpanKind
    ) -> Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(name, context=context, kind=kind, attributes=attributes)

    def _content(self, value: Any) -> str:
        """``value`` as redacted text (JSON unless it is a string)."""
        shown = value if isinstance(value, str) else json.dumps(value, default=jsonable)
        return redact_secrets(shown)

    def _run_started(self, event: ev.RunStarted) -> None:
        if event.run_id in self._runs:
            return
        stopped = self._stopped.pop(event.run_id, None)  # continued: no cancel_run ends it now
        attributes: Attributes = {}
        if self.capture_content:
            attributes[INPUT_MESSAGES] = self._content(
                [message("user", [text(input_text(event.run.input))])]
            )
        if event.session_id:
            attributes[CONVERSATION] = event.session_id
        decided = _continued(event.run)
        if decided or stopped is not None or event.run.turns:  # a decision's, a poll's, a crash's
            attributes["agentloop.run.continued"] = True
        spans = self._open_run(event.run_id, event.path, attributes, stopped)
        if decided:
            self._decided(event.run, spans)

    def _open_run(
        self, run_id: str, path: tuple[str, ...], attributes: Attributes, stopped: _Stopped | None
    ) -> _RunSpans:
        """The run span (``invoke_agent``) of the run at ``path``, under its adopting tool's.

        A run this observer saw pause or wait links to the span that ended there (``stopped``).
        """
        name = path[-1] if path else ROOT_AGENT
        attributes = {
            OPERATION: "invoke_agent",
            AGENT: name,
            "agentloop.run_id": run_id,
            **attributes,
        }
        if path:
            attributes["agentloop.agent.path"] = list(path)
        parent = self._adopting_tool(path)
        context = trace.set_span_in_context(parent) if parent is not None else None
        links = [trace.Link(stopped.span)] if stopped is not None else None
        root = self.tracer.start_span(
            f"invoke_agent {name}", context, SpanKind.INTERNAL, attributes, links
        )
        spans = self._runs[run_id] = _RunSpans(root, path)
        return spans

    def _ended_unstarted(self, event: ev.RunFinished) -> None:
        """A run that ends without starting here: a paused or waiting run's ``cancel_run``.

        Its earlier span ended at the pause; the cancel gets a run span of its own (marked
        ``agentloop.run.continued`` and ``agentloop.run.cancelled``) that carries the error,
        on the path its paused span had (a sub-agent's cancel arrives directly, its parent
        already ended), once. Any other end of a run not open here opens nothing.
        """
        if not isinstance(event.run.stop_reason, Cancelled):  # a pause's end, delivered again
            return
        stopped = self._stopped.pop(event.run_id, None)
        if stopped is None:
            return
        marks: Attributes = {"agentloop.run.continued": True, "agentloop.run.cancelled": True}
        if event.session_id:
            marks[CONVERSATION] = event.session_id
        spans = self._open_run(event.run_id, stopped.path, marks, stopped)
        self._run_finished(event, spans)

    def _decided(self, run: Run[Any], spans: _RunSpans) -> None:
        """A continued run: one event per decision just applied, and the paused turn reopened.

        ``run.decisions[-1]`` is the set this continue applied. Its edited arguments, answers
        and denial reasons are a person's words: only the kind of each decision is recorded.
        """
        turn = run.turns[-1]
        names = {call.id: call.name for call in turn.tool_calls}
        for call_id, decision in run.decisions[-1].get("decisions", {}).items():
            attributes: Attributes = {
                "gen_ai.tool.call.id": call_id,
                "agentloop.decision.kind": str(decision.get("kind")),
            }
            if call_id in names:  # a sub-agent's call is not in this run's turn
                attributes["gen_ai.tool.name"] = names[call_id]
            spans.root.add_event("agentloop.decision", attributes)
        index: Attributes = {"agentloop.turn.index": turn.index, "agentloop.turn.continued": True}
        if turn.agent is not None:  # paused inside a handoff's receiver (SPEC 26)
            index[AGENT] = turn.agent
        spans.turn = self._start("agentloop.turn", spans.root, index, SpanKind.INTERNAL)
        spans.turn_index = turn.index

    def _adopting_tool(self, path: tuple[str, ...]) -> Span | None:
        """The parent's open span of the tool call running the sub-agent at ``path``.

        Events do not say which call started a sub-agent run, so two parallel calls of the same
        agent-tool may swap their children (both stay under a call of that tool).
        """
        if not path:
            return None
        for spans in self._runs.values():
            if spans.path != path[:-1]:
                continue
            for call_id, (tool, span) in spans.tools.items():
                if tool == path[-1] and call_id not in spans.adopted:
                    spans.adopted.add(call_id)
                    return span
        return None

    def _turn_started(self, event: ev.TurnStarted, spans: _RunSpans) -> None:
        if spans.chat is not None:
            # The engine starts a turn over without a reply only when the provider rejected the
            # context as too long (it compacts, then asks again).
            spans.chat.set_attributes({ERROR_TYPE: "ContextLengthExceeded", CHANNEL: "hard"})
            spans.chat.set_status(Status(StatusCode.ERROR))
            spans.chat.end()
        if spans.turn is None or spans.turn_index != event.turn:
            _end(spans.turn)
            attributes: Attributes = {"agentloop.turn.index": event.turn}
            if event.agent is not None:  # a handoff's receiver rules this turn (SPEC 26)
                attributes[AGENT] = event.agent
            spans.turn = self._start("agentloop.turn", spans.root, attributes, SpanKind.INTERNAL)
            spans.turn_index = event.turn
        model: Attributes = {}
        if event.model:
            model[REQUEST_MODEL] = event.model
        if event.provider:
            model[PROVIDER] = event.provider
        spans.root.set_attributes(model)
        name, spans.waited = (f"chat {event.model}" if event.model else "chat"), 0.0
        if event.agent is not None:
            model[AGENT] = event.agent
        spans.chat = self._start(name, spans.turn, {OPERATION: "chat", **model}, SpanKind.CLIENT)

    def _model_responded(self, event: ev.ModelResponded, spans: _RunSpans) -> None:
        span, spans.chat = spans.chat, None
        if span is None:
            return
        response = event.response
        spans.calls[event.replayed] += 1  # a durable run's recovery: no usage counted again
        marked: Attributes = {REPLAYED: True}
        attributes = marked if event.replayed else usage_attributes(response.usage)
        if response.model:
            attributes["gen_ai.response.model"] = response.model
        if response.stop_reason:
            attributes["gen_ai.response.finish_reasons"] = [response.stop_reason]
        if self.capture_content:
            output = message_of(response.message, response.stop_reason)
            attributes[OUTPUT_MESSAGES] = self._content([output])
        span.set_attributes(attributes)
        span.end()

    def _rate_limit_wait(self, event: ev.RateLimitWait, spans: _RunSpans) -> None:
        spans.waited += event.wait_seconds
        spans.current().set_attribute("agentloop.rate_limit.wait_seconds", spans.waited)

    def _tool_started(self, event: ev.ToolCallStarted, spans: _RunSpans) -> None:
        call = event.call
        attributes: Attributes = {
            OPERATION: "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "agentloop.tool.attempt": event.attempt,
        }
        if event.agent is not None:
            attributes[AGENT] = event.agent
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = self._content(dict(call.arguments))
        parent = spans.turn or spans.root
        span = self._start(f"execute_tool {call.name}", parent, attributes, SpanKind.INTERNAL)
        _end(spans.tools.pop(call.id, (None, None))[1])
        spans.tools[call.id] = (call.name, span)

    def _tool_finished(self, event: ev.ToolCallFinished, spans: _RunSpans) -> None:
        spans.adopted.discard(event.call.id)
        entry = spans.tools.pop(event.call.id, None)
        if entry is None:
            return
        if event.result.is_error and event.result.content == INTERRUPTED_TEXT:
            spans.tools[event.call.id] = entry  # cut by the run's end: it ends with the run error
            return
        span = entry[1]
        if event.replayed:
            span.set_attribute(REPLAYED, True)
        if event.result.is_error:
            span.set_attributes({ERROR_TYPE: SOFT_ERROR_TYPE, CHANNEL: "soft"})
            span.set_status(Status(StatusCode.ERROR))
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.result", self._content(event.result.content))
        span.end()

    def _guardrail_checked(self, event: ev.GuardrailChecked, spans: _RunSpans) -> None:
        """A span per check, ending now and as long as the check took."""
        attributes: Attributes = {
            "agentloop.guardrail.name": event.guardrail,
            "agentloop.guardrail.kind": event.kind,
            "agentloop.guardrail.tripped": event.tripped,
        }
        if event.replayed:
            attributes[REPLAYED] = True
        if event.tripped:
            channel = "soft" if event.soft else "hard"
            attributes.update({ERROR_TYPE: "GuardrailTripped", CHANNEL: channel})
            if self.capture_content and event.reason:
                attributes["agentloop.guardrail.reason"] = redact_secrets(event.reason)
        end = time.time_ns()
        parent = trace.set_span_in_context(spans.turn or spans.root)
        span = self.tracer.start_span(
            f"guardrail {event.guardrail}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=end - max(0, int(event.duration * 1e9)),
        )
        if event.tripped:
            span.set_status(Status(StatusCode.ERROR, "GuardrailTripped"))
        span.end(end_time=end)

    def _run_paused(self, event: ev.RunPaused, spans: _RunSpans) -> None:
        """The run waits on its pending calls: ids, tools and kinds, never their arguments."""
        spans.stopped = True
        pending = event.pending
        for waiting in pending:  # the pending call's span, opened when it was about to run
            entry = spans.tools.get(waiting.id)
            if entry is not None:
                entry[1].set_attribute("agentloop.tool.pending", waiting.kind)
        spans.root.set_attributes({"agentloop.run.paused": True, "agentloop.pending": len(pending)})
        spans.root.add_event(
            "agentloop.run.paused",
            {
                "agentloop.pending.call_ids": [p.id for p in pending],
                "agentloop.pending.tools": [p.call.name for p in pending],
                "agentloop.pending.kinds": [p.kind for p in pending],
            },
        )

    def _run_waiting(self, event: ev.RunWaiting, spans: _RunSpans) -> None:
        """The run waits on a provider batch: a poll or a ``cancel_run`` goes on later."""
        spans.stopped = True
        waiting = event.waiting
        batch: Attributes = {
            "agentloop.batch.provider": waiting.provider,
            "agentloop.batch.id": waiting.batch_id,
            "agentloop.batch.request_id": waiting.request_id,
        }
        if spans.chat is not None:  # the submitted model call: its reply comes with a poll
            spans.chat.set_attributes(batch)
        spans.root.set_attribute("agentloop.run.waiting", True)
        spans.root.add_event("agentloop.run.waiting", batch)

    def _turn_finished(self, event: ev.TurnFinished, spans: _RunSpans) -> None:
        if spans.turn is not None:
            spans.turn.set_attribute("agentloop.turn.tool_calls", len(event.turn.tool_calls))
        _end(spans.turn)
        spans.turn = None

    def _run_finished(self, event: ev.RunFinished, spans: _RunSpans) -> None:
        del self._runs[event.run_id]
        run = event.run
        error = run.stop_reason
        if spans.stopped:  # paused or waiting: a cancel_run may end it later (_ended_unstarted)
            self._stopped[event.run_id] = _Stopped(spans.path, spans.root.get_span_context())
            if len(self._stopped) > _STOPPED_KEPT:
                del self._stopped[next(iter(self._stopped))]
        left_open = [span for _, span in spans.tools.values()] + [spans.chat, spans.turn]
        for span in left_open:
            if span is not None:
                if error is not None:
                    self._record_error(span, error)
                span.end()
        root = spans.root
        live, replayed = spans.calls
        if replayed:  # a recovery: a run span that only retraced its record counts no usage
            root.set_attributes({"agentloop.replayed_calls": replayed, REPLAYED: not live})
        usage = usage_attributes(run.usage) if live or not replayed else {}
        root.set_attributes({**usage, "agentloop.turns": len(run.turns)})
        if error is not None:
            self._record_error(root, error)
        elif self.capture_content and run.output is not None:
            output = message("assistant", [text(self._content(run.output))])
            root.set_attribute(OUTPUT_MESSAGES, self._content([output]))
        root.end()

    def _record_error(self, span: Span, error: BaseException) -> None:
        span.set_attributes({**error_attributes(error), CHANNEL: "hard"})
        description = self._content(str(error)) if self.capture_content else type(error).__name__
        span.set_status(Status(StatusCode.ERROR, description))

    def _span_event(self, event: ev.Event, spans: _RunSpans) -> None:
        describe = SPAN_EVENTS.get(type(event))
        if describe is not None:
            spans.current().add_event(*describe(event, self.capture_content))


_Handler = Callable[[OtelObserver, Any, _RunSpans], None]

_HANDLERS: dict[type[ev.Event], _Handler] = {
    ev.TurnStarted: OtelObserver._turn_started,
    ev.ModelResponded: OtelObserver._model_responded,
    ev.RateLimitWait: OtelObserver._rate_limit_wait,
    ev.ToolCallStarted: OtelObserver._tool_started,
    ev.ToolCallFinished: OtelObserver._tool_finished,
    ev.GuardrailChecked: OtelObserver._guardrail_checked,
    ev.TurnFinished: OtelObserver._turn_finished,
    ev.RunPaused: OtelObserver._run_paused,
    ev.RunWaiting: OtelObserver._run_waiting,
    ev.RunFinished: OtelObserver._run_finished,
}


def _continued(run: Run[Any]) -> bool:
    """Whether a starting run is a paused one continued (its last decision set just applied)."""
    return bool(run.decisions and run.turns and not run.pending)


def _end(span: Span | None) -> None:
    if span is not None:
        span.end()
