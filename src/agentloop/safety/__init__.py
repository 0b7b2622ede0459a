"""The safety stack: what keeps soft errors from becoming a trap.

Loop and convergence detection, per-tool circuit breakers, the bounded recovery layer and the
budget gate. Pure logic: no HTTP, no screen; the engine drives it.
"""

from agentloop.safety.breaker import ToolBreaker
from agentloop.safety.budget import Budget
from agentloop.safety.convergence import Convergence
from agentloop.safety.loops import LoopDetection
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

__all__ = [
    "MAX_RECOVERY_ATTEMPTS",
    "AskUser",
    "Budget",
    "Convergence",
    "Correction",
    "ExponentialBackoffRecovery",
    "Fail",
    "FailureAnalysis",
    "LoopDetection",
    "NoopReflector",
    "RecoveryAction",
    "RecoveryStrategy",
    "Reflector",
    "Retry",
    "Skip",
    "ToolBreaker",
    "ToolFailure",
]
