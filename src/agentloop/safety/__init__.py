"""The safety stack: what keeps soft errors from becoming a trap.

Loop and convergence detection, per-tool circuit breakers, the bounded recovery layer, the
budget gate, output limits and secret redaction. Pure logic: no HTTP, no screen; the engine
drives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloop._util.lazy import lazy_exports

if TYPE_CHECKING:
    from agentloop.safety.breaker import Admission, ToolBreaker, ToolBreakers, ToolHealth
    from agentloop.safety.budget import Budget, BudgetGate, BudgetWarning, Price
    from agentloop.safety.convergence import (
        Convergence,
        ConvergenceDetector,
        ConvergenceStatus,
        convergence_error,
    )
    from agentloop.safety.loops import LoopDetection, LoopDetector, LoopWarning
    from agentloop.safety.output import TRUNCATION_MARKER, limit_output
    from agentloop.safety.recovery import (
        MAX_RECOVERY_ATTEMPTS,
        AskUser,
        Correction,
        ExponentialBackoffRecovery,
        Fail,
        FailureAnalysis,
        NoopReflector,
        RecoveryAction,
        RecoveryStrategy,
        Reflector,
        Retry,
        Skip,
        ToolFailure,
    )
    from agentloop.safety.redact import REDACTED, redact_secrets
    from agentloop.safety.reflector import LLMReflector

__all__ = [
    "MAX_RECOVERY_ATTEMPTS",
    "REDACTED",
    "TRUNCATION_MARKER",
    "Admission",
    "AskUser",
    "Budget",
    "BudgetGate",
    "BudgetWarning",
    "Convergence",
    "ConvergenceDetector",
    "ConvergenceStatus",
    "Correction",
    "ExponentialBackoffRecovery",
    "Fail",
    "FailureAnalysis",
    "LLMReflector",
    "LoopDetection",
    "LoopDetector",
    "LoopWarning",
    "NoopReflector",
    "Price",
    "RecoveryAction",
    "RecoveryStrategy",
    "Reflector",
    "Retry",
    "Skip",
    "ToolBreaker",
    "ToolBreakers",
    "ToolFailure",
    "ToolHealth",
    "convergence_error",
    "limit_output",
    "redact_secrets",
]

# Each name loads its own module on first access: importing one safety module (the providers
# need ``redact``) does not import the others, nor pydantic for ``LLMReflector``.
_LAZY = {
    "Admission": "agentloop.safety.breaker",
    "AskUser": "agentloop.safety.recovery",
    "Budget": "agentloop.safety.budget",
    "BudgetGate": "agentloop.safety.budget",
    "BudgetWarning": "agentloop.safety.budget",
    "Convergence": "agentloop.safety.convergence",
    "ConvergenceDetector": "agentloop.safety.convergence",
    "ConvergenceStatus": "agentloop.safety.convergence",
    "Correction": "agentloop.safety.recovery",
    "ExponentialBackoffRecovery": "agentloop.safety.recovery",
    "Fail": "agentloop.safety.recovery",
    "FailureAnalysis": "agentloop.safety.recovery",
    "LLMReflector": "agentloop.safety.reflector",
    "LoopDetection": "agentloop.safety.loops",
    "LoopDetector": "agentloop.safety.loops",
    "LoopWarning": "agentloop.safety.loops",
    "MAX_RECOVERY_ATTEMPTS": "agentloop.safety.recovery",
    "NoopReflector": "agentloop.safety.recovery",
    "Price": "agentloop.safety.budget",
    "REDACTED": "agentloop.safety.redact",
    "RecoveryAction": "agentloop.safety.recovery",
    "RecoveryStrategy": "agentloop.safety.recovery",
    "Reflector": "agentloop.safety.recovery",
    "Retry": "agentloop.safety.recovery",
    "Skip": "agentloop.safety.recovery",
    "TRUNCATION_MARKER": "agentloop.safety.output",
    "ToolBreaker": "agentloop.safety.breaker",
    "ToolBreakers": "agentloop.safety.breaker",
    "ToolFailure": "agentloop.safety.recovery",
    "ToolHealth": "agentloop.safety.breaker",
    "convergence_error": "agentloop.safety.convergence",
    "limit_output": "agentloop.safety.output",
    "redact_secrets": "agentloop.safety.redact",
}
if not TYPE_CHECKING:  # mypy sees the imports above, and no other name
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
