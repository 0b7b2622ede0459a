"""The safety stack: what keeps soft errors from becoming a trap.

Loop and convergence detection, per-tool circuit breakers, the bounded recovery layer, the
budget gate, output limits and secret redaction. Pure logic: no HTTP, no screen; the engine
drives it.
"""

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
