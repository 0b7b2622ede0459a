"""Recovery: analyse a failed tool call, then decide whether to retry, skip, ask or fail.

A ``Reflector`` explains a failure (``FailureAnalysis``), a ``RecoveryStrategy`` turns the
analysis into a ``RecoveryAction``. The engine's driver enforces ``MAX_RECOVERY_ATTEMPTS``
whatever the strategy says, so no strategy can run a tool more than six times per call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from agentloop._util.backoff import exponential_backoff
from agentloop._util.numbers import is_finite
from agentloop._util.slots import record
from agentloop.errors import ConfigurationError

__all__ = [
    "MAX_RECOVERY_ATTEMPTS",
    "AskUser",
    "Correction",
    "ExponentialBackoffRecovery",
    "Fail",
    "FailureAnalysis",
    "NoopReflector",
    "RecoveryAction",
    "RecoveryStrategy",
    "Reflector",
    "Retry",
    "Severity",
    "Skip",
    "ToolFailure",
]

MAX_RECOVERY_ATTEMPTS = 5
"""Retries granted per call at most: attempt 0 is the original, 1..5 are retries."""

Severity: TypeAlias = Literal["low", "medium", "high", "critical"]


@record
class ToolFailure:
    """A failed tool call as the reflector sees it (``attempt`` is 0-based)."""

    tool: str
    arguments: Mapping[str, Any]
    error_text: str
    schema: Mapping[str, Any] | None
    attempt: int
    max_attempts: int = MAX_RECOVERY_ATTEMPTS
    validate: Callable[[Mapping[str, Any]], str | None] | None = None
    """Checks proposed arguments against the tool's schema: None when valid, else the problem."""


@record
class Correction:
    """A proposed fix: new arguments, another tool, or advice only."""

    kind: Literal["input_fix", "tool_change", "guidance"]
    arguments: Mapping[str, Any] | None = None
    tool: str | None = None
    guidance: str | None = None


@record
class FailureAnalysis:
    """What the reflector concluded about a failure."""

    is_recoverable: bool
    root_cause: str = ""
    severity: Severity = "medium"
    correction: Correction | None = None


@record
class Retry:
    """Run the call again after ``delay`` seconds (with the analysis' correction applied)."""

    delay: float = 0.0


@record
class Skip:
    """Give up; the model reads the original failing result."""

    reason: str = ""


@record
class AskUser:
    """Give up and suggest asking a human; the model reads the original failing result."""

    prompt: str = ""


@record
class Fail:
    """Give up; the model reads the original failing result."""

    reason: str = ""


RecoveryAction: TypeAlias = Retry | Skip | AskUser | Fail


@runtime_checkable
class Reflector(Protocol):
    """Explains a tool failure. Raising means ``Fail``."""

    async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
        """Analyse one failed attempt."""
        ...


@runtime_checkable
class RecoveryStrategy(Protocol):
    """Turns an analysis into an action; ``attempt`` is the 0-based attempt that failed."""

    def decide(self, analysis: FailureAnalysis, attempt: int, max_attempts: int) -> RecoveryAction:
        """Decide what happens after a failed attempt."""
        ...


class NoopReflector:
    """The default reflector: every failure is for the model to handle (no retry)."""

    async def analyze(self, failure: ToolFailure) -> FailureAnalysis:
        """Report the failure as not recoverable by retrying."""
        return FailureAnalysis(is_recoverable=False, root_cause=failure.error_text)

    def __repr__(self) -> str:
        return "NoopReflector()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NoopReflector)

    def __hash__(self) -> int:
        return hash(NoopReflector)


@record
class ExponentialBackoffRecovery:
    """Retry recoverable failures with delays ``base * 2**attempt`` capped at ``max_delay``.

    Non-recoverable failures fail at once; a high-severity failure with a correction asks the
    user. With the ``NoopReflector`` the net effect is one attempt per call.
    """

    max_retries: int = 3
    base_delay: float = 0.1
    max_delay: float = 30.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ConfigurationError(
                f"ExponentialBackoffRecovery.max_retries must be >= 0, got {self.max_retries}",
                field="max_retries",
            )
        if not all(is_finite(d) and d >= 0 for d in (self.base_delay, self.max_delay)):
            raise ConfigurationError(
                "ExponentialBackoffRecovery delays must be >= 0", field="base_delay"
            )

    def decide(self, analysis: FailureAnalysis, attempt: int, max_attempts: int) -> RecoveryAction:
        """Retry with backoff while the analysis says recoverable and retries remain."""
        if not analysis.is_recoverable:
            return Fail(analysis.root_cause)
        if attempt >= min(self.max_retries, max_attempts):
            return Fail("retries exhausted")
        if analysis.severity == "high" and analysis.correction is not None:
            return AskUser(analysis.root_cause)
        return Retry(exponential_backoff(attempt, self.base_delay, self.max_delay))
