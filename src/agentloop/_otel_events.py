"""Span events of ``OtelObserver``: the run's warnings and recoveries as GenAI span events.

Kept apart from ``agentloop.otel`` (the span tree) because each is a small pure function from an
event to ``(name, attributes)``: retries, fallbacks, model switches, stream resets, loop,
convergence and budget warnings and compaction land on the innermost open span.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from agentloop import events as ev
from agentloop.errors import ProviderError
from agentloop.safety.redact import redact_secrets

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

__all__ = ["ERROR_TYPE", "SPAN_EVENTS", "error_attributes"]

Attributes: TypeAlias = "dict[str, AttributeValue]"
_Described: TypeAlias = "tuple[str, Attributes]"

ERROR_TYPE = "error.type"


def _retry(event: ev.RetryScheduled, capture: bool) -> _Described:
    retry: Attributes = {
        "agentloop.retry.attempt": event.attempt,
        "agentloop.retry.wait_seconds": event.wait_seconds,
    }
    return "agentloop.retry", {**error_attributes(event.error), **retry}


def _models(event: ev.FellBack | ev.ModelSwitched) -> Attributes:
    return {"agentloop.from_model": event.from_model, "agentloop.to_model": event.to_model}


def _fallback(event: ev.FellBack, capture: bool) -> _Described:
    return "agentloop.fallback", {**error_attributes(event.error), **_models(event)}


def _loop(event: ev.LoopWarning, capture: bool) -> _Described:
    loop: Attributes = {"agentloop.loop.repetitions": event.repetitions}
    if capture:  # the pattern quotes the repeated call's arguments
        loop["agentloop.loop.pattern"] = redact_secrets(event.pattern)
    return "agentloop.loop_warning", loop


def _converged(event: ev.ConvergenceWarning, capture: bool) -> _Described:
    attributes: Attributes = {}
    for name in ("streak", "similarity", "action"):
        value = getattr(event.status, name, None)
        if isinstance(value, int | float | str):
            attributes[f"agentloop.convergence.{name}"] = value
    return "agentloop.convergence_warning", attributes


def _compacted(event: ev.Compacted, capture: bool) -> _Described:
    return "agentloop.compaction", {
        "agentloop.tokens.before": event.before,
        "agentloop.tokens.after": event.after,
    }


def _handoff(event: ev.HandoffOccurred, capture: bool) -> _Described:
    """A handoff (SPEC 26): the receiver rules from the next turn; None names the starter."""
    names: Attributes = {"agentloop.handoff.to_agent": event.to_agent or ""}
    if event.from_agent is not None:
        names["agentloop.handoff.from_agent"] = event.from_agent
    return "agentloop.handoff", names


def _budget(event: ev.BudgetWarning, capture: bool) -> _Described:
    return "agentloop.budget_warning", {
        "agentloop.budget.dimension": event.dimension,
        "agentloop.budget.spent": event.spent,
        "agentloop.budget.limit": event.limit,
    }


SPAN_EVENTS: dict[type[ev.Event], Callable[[Any, bool], _Described]] = {
    ev.RetryScheduled: _retry,
    ev.FellBack: _fallback,
    ev.ModelSwitched: lambda event, capture: ("agentloop.model_switched", _models(event)),
    ev.AttemptReset: lambda event, capture: ("agentloop.attempt_reset", {}),
    ev.LoopWarning: _loop,
    ev.ConvergenceWarning: _converged,
    ev.Compacted: _compacted,
    ev.CompactionFailed: lambda event, capture: (
        "agentloop.compaction_failed",
        error_attributes(event.error),
    ),
    ev.BudgetWarning: _budget,
    ev.HandoffOccurred: _handoff,
}
"""Events reported as span events on the innermost open span (stream fragments are not)."""


def error_attributes(error: BaseException) -> Attributes:
    """The class of ``error`` and, for a provider failure, its phase and HTTP status."""
    attributes: Attributes = {ERROR_TYPE: type(error).__name__}
    if isinstance(error, ProviderError):
        if error.phase is not None:
            attributes["agentloop.error.phase"] = error.phase.value
        if error.status_code is not None:
            attributes["http.response.status_code"] = error.status_code
        if error.provider:
            attributes["agentloop.error.provider"] = error.provider
    return attributes
