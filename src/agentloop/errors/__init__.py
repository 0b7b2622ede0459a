"""Every exception agentloop raises, in one module.

Hard errors end a run and reach the caller's code; soft errors never appear here because they
are tool results the model reads. The tree::

    AgentLoopError
    ├── TranscriptError                  a transcript is inconsistent or unsafe to send
    ├── ToolError(message, *, sick)      raised inside tools; the executor makes it a soft result
    ├── ToolNotFound(tool, available)    direct registry use only (in a run it is soft)
    ├── ToolExecutionError(tool, message)  direct registry use only
    ├── InvalidInput (also ValueError)   caller-supplied input is malformed
    │   └── DatasetError(message, *, path, case)   an eval dataset is malformed (section 23)
    ├── ConfigurationError (also ValueError)  at construction, before any request
    ├── LoopBudgetExceeded(kind, limit, actual)
    │   ├── MaxTurnsExceeded(max)        kind "iterations"
    │   └── BudgetExhausted(dimension, spent, limit)
    ├── ContextExceeded(used, limit)
    ├── CompactionFailed(used, limit, cause)
    ├── CompactionStalled(used, limit)
    ├── LoopDetected(message)
    ├── UserInputRequired(message)
    ├── ToolLimitReached(message)
    ├── ToolRecoveryExhausted(tool, attempts)
    ├── OutputValidationFailed(attempts, errors)   typed output stayed invalid past its retries
    ├── FallbackExhausted(retry_after)
    ├── Cancelled
    ├── CassetteMismatch(message, *, path, index, difference)   a replayed request differs
    ├── ModelRefused(reason, text)     the provider refused or blocked the reply (never retried)
    ├── GuardrailTripped(guardrail, reason)   an input or output guardrail tripped
    ├── HandoffLimitExceeded(limit)     more than RunConfig.max_handoffs handoffs in one run
    ├── RemoteAuthError(agent, status)   a remote agent refused our credentials (HTTP 401/403)
    ├── GovernorUnavailable(backend, cause)   the rate governor's backend failed (SPEC 25)
    ├── ReflectionError, MemoryBackendError, PhaseFailed(phase, message), LockPoisoned(what),
    │   InternalError
    └── ProviderError(message, *, provider, status_code, retry_after, request_id, phase,
        │             request_sent, redirect_host)
        ├── AuthError
        ├── BadRequestError
        │   └── ContextLengthExceeded
        ├── ModelNotFound
        ├── InsufficientCredits
        ├── UnexpectedRedirect
        ├── RateLimited
        │   └── RateLimitEscalation(attempts, retry_after)
        ├── ProviderUnavailable
        │   └── ProviderUnreachable
        ├── ProviderTimeout
        ├── ResponseInvalid
        └── StreamError(partial)

Every error pickles with all its attributes, answers ``is_recoverable()`` from an explicit table
(the ``retryable`` providers' errors, and six classes marked always recoverable),
``is_cancelled()`` (true only for ``Cancelled``), gives the seed-001 word in ``recoverability``
and carries ``summary`` (the ``ConversationSummary`` of the run it ended, else None).

This package is the bottom layer: nothing in it imports anything of ours outside it. The classes
live in ``_base`` (the base, runs, tools, config), ``_provider`` (the HTTP layer's) and
``_evals`` (cassettes and eval datasets), and
report ``agentloop.errors`` as their module, the name they are raised, pickled and documented
under.
"""

from agentloop.errors import _base, _evals, _fleet, _provider
from agentloop.errors._base import (
    AgentLoopError,
    BudgetExhausted,
    Cancelled,
    CompactionFailed,
    CompactionStalled,
    ConfigurationError,
    ContextExceeded,
    ConversationSummary,
    FallbackExhausted,
    GuardrailTripped,
    HandoffLimitExceeded,
    InternalError,
    InvalidInput,
    LockPoisoned,
    LoopBudgetExceeded,
    LoopDetected,
    MaxTurnsExceeded,
    MemoryBackendError,
    ModelRefused,
    OutputValidationFailed,
    PhaseFailed,
    ReflectionError,
    RemoteAuthError,
    ToolError,
    ToolExecutionError,
    ToolLimitReached,
    ToolNotFound,
    ToolRecoveryExhausted,
    TranscriptError,
    UserInputRequired,
    _rebuild,  # noqa: F401  (pickles made before the split name it here)
    format_available,
)
from agentloop.errors._evals import CassetteMismatch, DatasetError
from agentloop.errors._fleet import GovernorUnavailable
from agentloop.errors._provider import (
    AttemptRecord,
    AuthError,
    BadRequestError,
    ContextLengthExceeded,
    FailurePhase,
    InsufficientCredits,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    ProviderUnreachable,
    RateLimited,
    RateLimitEscalation,
    ResponseInvalid,
    StreamError,
    UnexpectedRedirect,
)

__all__ = [
    "AgentLoopError",
    "AttemptRecord",
    "AuthError",
    "BadRequestError",
    "BudgetExhausted",
    "Cancelled",
    "CassetteMismatch",
    "CompactionFailed",
    "CompactionStalled",
    "ConfigurationError",
    "ContextExceeded",
    "ContextLengthExceeded",
    "ConversationSummary",
    "DatasetError",
    "FailurePhase",
    "FallbackExhausted",
    "GovernorUnavailable",
    "GuardrailTripped",
    "HandoffLimitExceeded",
    "InsufficientCredits",
    "InternalError",
    "InvalidInput",
    "LockPoisoned",
    "LoopBudgetExceeded",
    "LoopDetected",
    "MaxTurnsExceeded",
    "MemoryBackendError",
    "ModelNotFound",
    "ModelRefused",
    "OutputValidationFailed",
    "PhaseFailed",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "ProviderUnreachable",
    "RateLimitEscalation",
    "RateLimited",
    "ReflectionError",
    "RemoteAuthError",
    "ResponseInvalid",
    "StreamError",
    "ToolError",
    "ToolExecutionError",
    "ToolLimitReached",
    "ToolNotFound",
    "ToolRecoveryExhausted",
    "TranscriptError",
    "UnexpectedRedirect",
    "UserInputRequired",
    "format_available",
]

for _name in __all__:
    _value = globals()[_name]
    if getattr(_value, "__module__", None) in (
        _base.__name__,
        _evals.__name__,
        _fleet.__name__,
        _provider.__name__,
    ):
        _value.__module__ = __name__
del _name, _value
