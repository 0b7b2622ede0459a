"""Optional OpenTelemetry spans: run, turn, model call and tool call (the ``otel`` extra).

``OtelObserver`` is an ordinary observer, so tracing never changes a run: pass it in
``Agent(observers=[OtelObserver()])``. Spans nest run → turn → (model call, tool calls); a
tool call gets one span per attempt. Spans left open by a hard error (a cancelled tool, a
failed model call) are ended at run end with the run's error recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentloop.messages import ToolCallPart, ToolResultPart
from agentloop.model import ModelResponse
from agentloop.observers import Observer
from agentloop.run import Run, Turn

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = ["OtelObserver"]


class OtelObserver(Observer):
    """Emits OpenTelemetry spans for runs, turns, model calls and tool calls."""

    def __init__(self, tracer: Tracer | None = None) -> None:
        from opentelemetry import trace

        self._trace = trace
        self.tracer = tracer or trace.get_tracer("agentloop")
        self._runs: dict[str, Span] = {}
        self._turns: dict[str, Span] = {}
        self._models: dict[str, Span] = {}
        self._tools: dict[tuple[str, str], Span] = {}

    def _child(self, name: str, parent: Span | None, **attributes: Any) -> Span:
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(name, context=context, attributes=attributes)

    def on_run_start(self, run: Run) -> None:
        """Open the run span."""
        self._runs[run.id] = self._child("agentloop.run", None, **{"agentloop.run_id": run.id})

    def on_turn_start(self, run: Run, index: int) -> None:
        """Open a turn span and its model-call span."""
        turn = self._child("agentloop.turn", self._runs.get(run.id), **{"agentloop.turn": index})
        self._turns[run.id] = turn
        self._models[run.id] = self._child("agentloop.model_call", turn)

    def on_response(self, run: Run, response: ModelResponse) -> None:
        """Close the model-call span with the model and token counts."""
        span = self._models.pop(run.id, None)
        if span is not None:
            span.set_attribute("gen_ai.response.model", response.model)
            span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
            span.set_attribute("agentloop.tool_calls", len(response.tool_calls))
            span.end()

    def on_tool_pre(self, run: Run, call: ToolCallPart, attempt: int) -> None:
        """Open a tool-call span for this attempt."""
        attributes = {"agentloop.tool": call.name, "agentloop.call_id": call.id}
        attributes["agentloop.attempt"] = attempt  # type: ignore[assignment]
        span = self._child("agentloop.tool_call", self._turns.get(run.id), **attributes)
        self._tools[(run.id, call.id)] = span

    def on_tool_post(
        self, run: Run, call: ToolCallPart, result: ToolResultPart, attempt: int, duration: float
    ) -> None:
        """Close the attempt's span; a soft error is marked, not raised."""
        span = self._tools.pop((run.id, call.id), None)
        if span is not None:
            span.set_attribute("agentloop.is_error", result.is_error)
            span.end()

    def on_turn_end(self, run: Run, turn: Turn) -> None:
        """Close the turn span."""
        span = self._turns.pop(run.id, None)
        if span is not None:
            span.end()

    def on_run_end(self, run: Run) -> None:
        """Close every span still open for the run; the run span carries the outcome."""
        from opentelemetry.trace import Status, StatusCode

        error = run.stop_reason
        leftovers = [s for k, s in list(self._tools.items()) if k[0] == run.id]
        self._tools = {k: s for k, s in self._tools.items() if k[0] != run.id}
        leftovers += [m.pop(run.id) for m in (self._models, self._turns) if run.id in m]
        for span in leftovers:
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            span.end()
        root = self._runs.pop(run.id, None)
        if root is None:
            return
        root.set_attribute("agentloop.turns", len(run.turns))
        if error is not None:
            root.set_attribute("agentloop.stop_reason", type(error).__name__)
            root.set_status(Status(StatusCode.ERROR, str(error)))
        root.end()
