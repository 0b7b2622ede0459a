"""Observers and the event bus: read-only consumers of the one event channel.

Subclass ``Observer`` and override ``on_event`` (or the per-event ``on_*`` methods); methods are
synchronous and cheap to skip (the bus only calls observers that override something). An
observer that raises is logged and ignored: observing never changes a run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentloop._util.lazy import lazy_module
from agentloop.hooks import overrides
from agentloop.messages import ToolCallPart, ToolResultPart
from agentloop.model import ModelResponse

if TYPE_CHECKING:
    from agentloop import events as ev
    from agentloop.errors import AgentLoopError
    from agentloop.events import Event
    from agentloop.run import Run, Turn

if not TYPE_CHECKING:  # the event classes load when somebody first listens
    ev = lazy_module("agentloop.events")

__all__ = ["EVENTS", "EventBus", "Observer"]

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
    """No-op base class: override ``on_event`` (every event), or any per-event method.

    ``on_event(event)`` receives every ``agentloop.events`` object. The ``on_*`` methods are a
    convenience over the same channel for observers that want a few events with their run: an
    observer that does not override ``on_event`` gets the ``on_*`` methods it overrides called
    for its own agent's events (an agent-as-tool's forwarded events reach only ``on_event``).
    """

    def on_event(self, event: Event) -> None:
        """Every event of the agent's runs, in order."""

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


_Legacy = Callable[[Any, "Run"], tuple[Any, ...]]


def _legacy_table() -> dict[type[Event], tuple[str, _Legacy]]:
    """Each event class's ``on_*`` method and its arguments (built for the first such observer)."""
    return {
        ev.RunStarted: ("on_run_start", lambda e, r: (r,)),
        ev.TurnStarted: ("on_turn_start", lambda e, r: (r, e.turn)),
        ev.TextDelta: ("on_text_delta", lambda e, r: (r, e.text)),
        ev.AttemptReset: ("on_attempt_reset", lambda e, r: (r,)),
        ev.ModelResponded: ("on_response", lambda e, r: (r, e.response)),
        ev.TurnFinished: ("on_turn_end", lambda e, r: (r, e.turn)),
        ev.ToolCallRequested: ("on_tool_call_received", lambda e, r: (r, e.call)),
        ev.ToolCallStarted: ("on_tool_pre", lambda e, r: (r, e.call, e.attempt)),
        ev.ToolCallFinished: (
            "on_tool_post",
            lambda e, r: (r, e.call, e.result, e.attempt, e.duration),
        ),
        ev.LoopWarning: ("on_loop_detected", lambda e, r: (r, e.pattern, e.repetitions)),
        ev.ConvergenceWarning: ("on_convergence_detected", lambda e, r: (r, e.status)),
        ev.Compacted: ("on_compaction", lambda e, r: (r, e.before, e.after)),
        ev.CompactionFailed: ("on_compaction_failed", lambda e, r: (r, e.error)),
        ev.RetryScheduled: ("on_retry", lambda e, r: (r, e.error, e.attempt, e.wait_seconds)),
        ev.FellBack: ("on_fallback", lambda e, r: (r, e.from_model, e.to_model, e.error)),
        ev.ModelSwitched: ("on_model_switched", lambda e, r: (r, e.from_model, e.to_model)),
        ev.BudgetWarning: ("on_budget_warn", lambda e, r: (r, e.dimension, e.spent, e.limit)),
        ev.RunFinished: ("on_run_end", lambda e, r: (r,)),
    }


class EventBus:
    """One agent's event channel: delivers each event to its observers and run listeners.

    ``run`` and ``turn`` say where the agent is (emitters stamp events with them); ``active`` is
    False when nobody listens, so emitters skip building events at all. Listeners (a stream's
    queue, a parent agent's forwarder) are attached for one run. An observer or listener that
    raises is logged and ignored.
    """

    __slots__ = (
        "_listeners", "_observers", "active", "agent", "gate", "run", "session_id", "turn"
    )  # fmt: skip

    def __init__(self, observers: Sequence[Observer], session_id: str = "") -> None:
        self.session_id = session_id
        self.agent: str | None = None
        """The active agent's handoff name while a run handed off (SPEC 26): stamped on events."""
        self._observers = (  # none: no generator made (a session per conversation builds one)
            tuple((o, _legacy_handlers(o)) for o in observers if _listens(o)) if observers else ()
        )
        self._listeners: tuple[Callable[[Event], None], ...] = ()  # a list: one object more
        self.run: Run[Any] | None = None
        self.turn = 0
        self.active = bool(self._observers)
        self.gate: Callable[[Event], bool] | None = None
        """While set, every event goes to it first; True means it holds the event (the
        engine's output-guardrail holdback, which emits it again later or never)."""

    @property
    def run_id(self) -> str:
        """The current run's id."""
        return self.run.id if self.run is not None else ""

    def attach(self, listener: Callable[[Event], None]) -> None:
        """Deliver every event to ``listener`` too (until ``detach``)."""
        self._listeners = (*self._listeners, listener)
        self.active = True

    def detach(self, listener: Callable[[Event], None]) -> None:
        """Stop delivering to ``listener``."""
        listeners = list(self._listeners)
        listeners.remove(listener)
        self._listeners = tuple(listeners)
        self.active = bool(self._observers or self._listeners)

    def emit(self, event: Event) -> None:
        """Deliver ``event`` to every listener and observer, stamped with the session's id.

        An event that already names a session (a child agent's, forwarded) keeps it. After a
        handoff (SPEC 26) the run's own events are stamped with the active agent's name.
        """
        if not event.session_id:
            _stamp(event, self.session_id)
        if self.agent is not None and event.agent is None and not event.path:
            _stamp_agent(event, self.agent)
        if self.gate is not None and self.gate(event):
            return
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("event listener %r raised on %s; ignored", listener, event)
        for observer, legacy in self._observers:
            try:
                if legacy is None:
                    observer.on_event(event)
                else:
                    self._legacy(observer, legacy, event)
            except Exception:
                logger.exception(
                    "observer %r raised on %s; ignored", observer, type(event).__name__
                )

    def _legacy(
        self, observer: Observer, legacy: dict[type[Event], tuple[str, _Legacy]], event: Event
    ) -> None:
        """An observer's per-event method (``on_tool_pre``...), for this agent's run's events."""
        if self.run is not None and event.run_id == self.run.id:
            entry = legacy.get(type(event))
            if entry is not None:
                getattr(observer, entry[0])(*entry[1](event, self.run))


def _first_stamp(event: Event, session_id: str) -> None:
    """Set ``event.session_id`` through its slot, past frozen (the setter, bound on first use)."""
    global _stamp
    _stamp = ev.Event.session_id.__set__  # type: ignore[attr-defined]
    _stamp(event, session_id)


_stamp: Callable[[Event, str], None] = _first_stamp


def _stamp_agent(event: Event, agent: str) -> None:
    """Set ``event.agent`` through its slot, past frozen."""
    ev.Event.agent.__set__(event, agent)  # type: ignore[union-attr]


def _listens(observer: Observer) -> bool:
    return overrides(observer, Observer, "on_event") or any(
        overrides(observer, Observer, name) for name in EVENTS
    )


def _legacy_handlers(observer: Observer) -> dict[type[Event], tuple[str, _Legacy]] | None:
    """None when the observer takes events through ``on_event``; else its per-event methods."""
    if overrides(observer, Observer, "on_event"):
        return None
    return {
        kind: entry
        for kind, entry in _legacy_table().items()
        if overrides(observer, Observer, entry[0])
    }
