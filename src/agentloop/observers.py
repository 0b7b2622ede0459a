"""Observers: read-only callbacks for every event of a run.

Subclass ``Observer`` and override what you need; methods are synchronous and cheap to skip
(the fan-out only calls observers that override an event). An observer that raises is logged
and ignored: observing never changes a run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentloop.hooks import overrides
from agentloop.messages import ToolCallPart, ToolResultPart
from agentloop.model import ModelResponse

if TYPE_CHECKING:
    from agentloop.errors import AgentLoopError
    from agentloop.run import Run, Turn

__all__ = ["EVENTS", "Observer", "ObserverFanout"]

logger = logging.getLogger("agentloop")

EVENTS = (
    "on_run_start",
    "on_turn_start",
    "on_text_delta",
    "on_attempt_reset",
    "on_response",
    "on_turn_end",
    "on_tool_call_received",
    "on_tool_pre",
    "on_tool_post",
    "on_loop_detected",
    "on_convergence_detected",
    "on_compaction",
    "on_compaction_failed",
    "on_retry",
    "on_fallback",
    "on_model_switched",
    "on_budget_warn",
    "on_run_end",
)


class Observer:
    """No-op base class: override any event."""

    def on_run_start(self, run: Run) -> None:
        """A run started."""

    def on_turn_start(self, run: Run, index: int) -> None:
        """Turn ``index`` is about to call the model."""

    def on_text_delta(self, run: Run, text: str) -> None:
        """A streamed text fragment arrived."""

    def on_attempt_reset(self, run: Run) -> None:
        """A streamed attempt failed and a retry starts: discard fragments seen so far."""

    def on_response(self, run: Run, response: ModelResponse) -> None:
        """The model replied."""

    def on_turn_end(self, run: Run, turn: Turn) -> None:
        """A turn finished (its tool calls dispatched)."""

    def on_tool_call_received(self, run: Run, call: ToolCallPart) -> None:
        """The model asked for a tool call (once per call)."""

    def on_tool_pre(self, run: Run, call: ToolCallPart, attempt: int) -> None:
        """An attempt of a tool call starts."""

    def on_tool_post(
        self, run: Run, call: ToolCallPart, result: ToolResultPart, attempt: int, duration: float
    ) -> None:
        """An attempt of a tool call produced a result (pair with ``on_tool_pre`` by call id)."""

    def on_loop_detected(self, run: Run, pattern: str, repetitions: int) -> None:
        """A repeated operation reached the warning threshold."""

    def on_convergence_detected(self, run: Run, status: Any) -> None:
        """Terminal replies converged."""

    def on_compaction(self, run: Run, before: int, after: int) -> None:
        """A compaction pass shrank the transcript from ``before`` to ``after`` tokens."""

    def on_compaction_failed(self, run: Run, error: AgentLoopError) -> None:
        """A compaction pass failed."""

    def on_retry(self, run: Run, error: BaseException, attempt: int, wait_seconds: float) -> None:
        """A model request failed and will be retried."""

    def on_fallback(self, run: Run, from_model: str, to_model: str, error: BaseException) -> None:
        """A request failed over to another model."""

    def on_model_switched(self, run: Run, from_model: str, to_model: str) -> None:
        """The serving model changed."""

    def on_budget_warn(self, run: Run, dimension: str, spent: float, limit: float) -> None:
        """A budget dimension crossed its soft line."""

    def on_run_end(self, run: Run) -> None:
        """A run ended (``run.stop_reason`` says how)."""


class ObserverFanout:
    """Calls each event on the observers that override it; errors are logged and ignored."""

    def __init__(self, observers: Sequence[Observer]) -> None:
        self._by_event: dict[str, tuple[Observer, ...]] = {
            event: tuple(o for o in observers if overrides(o, Observer, event)) for event in EVENTS
        }

    def emit(self, event: str, *args: Any) -> None:
        """Deliver ``event`` to every observer that overrides it."""
        for observer in self._by_event[event]:
            try:
                getattr(observer, event)(*args)
            except Exception:
                logger.exception("observer %r raised in %s; ignored", observer, event)
