"""Every exception agentloop raises, in one module.

Hard errors end a run and reach the caller's code; soft errors never appear here because they
are tool results the model reads. The tree::

    AgentLoopError
    ├── TranscriptError                  a transcript is inconsistent or unsafe to send
    ├── ToolError(message, *, sick)      raised inside tools; the executor makes it a soft result
    ├── ToolNotFound(tool, available)    direct registry use only (in a run it is soft)
    ├── ToolExecutionError(tool, message)  direct registry use only
    ├── InvalidInput (also ValueError)   caller-supplied input is malformed
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

Every error pickles with all its attributes, answers ``is_recoverable()`` from an explicit table,
``is_cancelled()`` (true only for ``Cancelled``), gives the seed-001 word in ``recoverability``
and carries ``summary`` (the ``ConversationSummary`` of the run it ended, else None).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from agentloop.run import ConversationSummary

__all__ = [
    "AgentLoopError",
    "AttemptRecord",
    "AuthError",
    "BadRequestError",
    "BudgetExhausted",
    "Cancelled",
    "CompactionFailed",
    "CompactionStalled",
    "ConfigurationError",
    "ContextExceeded",
    "ContextLengthExceeded",
    "FailurePhase",
    "FallbackExhausted",
    "InsufficientCredits",
    "InternalError",
    "InvalidInput",
    "LockPoisoned",
    "LoopBudgetExceeded",
    "LoopDetected",
    "MaxTurnsExceeded",
    "MemoryBackendError",
    "OutputValidationFailed",
    "ModelNotFound",
    "PhaseFailed",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "ProviderUnreachable",
    "RateLimitEscalation",
    "RateLimited",
    "ReflectionError",
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

_MAX_LISTED_TOOLS = 10


def _rebuild(cls: type[AgentLoopError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    """Recreate an error from its pickled parts without re-running ``__init__``."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class AgentLoopError(Exception):
    """Base of every error agentloop raises."""

    recoverability: ClassVar[str] = "no"
    summary: ConversationSummary | None

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.summary = None

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))

    def is_recoverable(self) -> bool:
        """Whether another attempt (maybe after a pause) is worth making."""
        return _is_recoverable(self)

    def is_cancelled(self) -> bool:
        """True only for ``Cancelled``: a clean stop, not a failure to alert on."""
        return False

    def attributes(self) -> dict[str, Any]:
        """The error's typed attributes (everything but ``message`` and ``summary``)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("message", "summary")}


class TranscriptError(AgentLoopError):
    """A transcript is inconsistent or unsafe to send (names the offending message)."""

    def __init__(self, message: str, *, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class ToolError(AgentLoopError):
    """Raised inside a tool: the text is for the model and is shown to it verbatim.

    ``sick=True`` says the tool itself is failing, not the model's input (an MCP server that
    died mid-call): the text is still shown verbatim, and the tool circuit breaker counts the
    failure as it counts a timeout or a panic.
    """

    recoverability = "n/a"

    def __init__(self, message: str = "", *, sick: bool = False) -> None:
        super().__init__(message)
        self.sick = sick


def format_available(available: Sequence[str]) -> str:
    """Render a tool list the way ``ToolNotFound`` shows it: at most 10 names, then a count."""
    names = list(available)
    if not names:
        return "none registered"
    shown = ", ".join(names[:_MAX_LISTED_TOOLS])
    if len(names) > _MAX_LISTED_TOOLS:
        shown += f"... (and {len(names) - _MAX_LISTED_TOOLS} more)"
    return shown


class ToolNotFound(AgentLoopError):
    """A tool name missed the registry (direct registry use; inside a run it is soft)."""

    def __init__(self, tool: str, available: Sequence[str] = ()) -> None:
        super().__init__(f"Tool not found: {tool}. Available: {format_available(available)}")
        self.args = (tool, list(available))
        self.tool = tool
        self.available = list(available)


class ToolExecutionError(AgentLoopError):
    """A tool ran and failed hard (direct registry use only)."""

    recoverability = "yes"

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(f"Tool execution error: {tool}: {message}")
        self.args = (tool, message)
        self.tool = tool
        self.detail = message


class InvalidInput(AgentLoopError, ValueError):
    """Caller-supplied input is malformed; retrying the same input repeats the failure."""


class ConfigurationError(AgentLoopError, ValueError):
    """Configuration is absent or contradictory; raised at construction, before any request."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class LoopBudgetExceeded(AgentLoopError):
    """A run limit was reached (``kind``: iterations, deadline, max_tokens, tokens, tool_calls)."""

    recoverability = "config"

    def __init__(self, kind: str, limit: float, actual: float, message: str | None = None) -> None:
        super().__init__(message or f"Loop budget exceeded: {kind} limit {limit} (at {actual})")
        self.args = (kind, limit, actual)
        self.kind = kind
        self.limit = limit
        self.actual = actual


class MaxTurnsExceeded(LoopBudgetExceeded):
    """The run hit ``RunConfig.max_turns`` (default 200)."""

    def __init__(self, max: int) -> None:
        super().__init__("iterations", max, max, f"Max turns exceeded: {max}")
        self.args = (max,)
        self.max = max


_BUDGET_KINDS = {
    "tokens": "tokens",
    "output_tokens": "max_tokens",
    "turns": "iterations",
    "wall_clock": "deadline",
    "tool_calls": "tool_calls",
    "cost_usd": "tokens",
}


class BudgetExhausted(LoopBudgetExceeded):
    """The budget gate refused the next request before it was sent."""

    recoverability = "no"

    def __init__(self, dimension: str, spent: float, limit: float) -> None:
        kind = _BUDGET_KINDS.get(dimension, dimension)
        text = f"Budget exhausted: {dimension} spent {spent} of {limit}"
        super().__init__(kind, limit, spent, text)
        self.args = (dimension, spent, limit)
        self.dimension = dimension
        self.spent = spent


class ContextExceeded(AgentLoopError):
    """The conversation cannot fit the window after compaction, or the provider rejected twice."""

    recoverability = "yes"

    def __init__(self, used: int, limit: int) -> None:
        super().__init__(f"Context window exceeded: used {used} of {limit} tokens")
        self.args = (used, limit)
        self.used = used
        self.limit = limit


class CompactionFailed(AgentLoopError):
    """A compaction pass raised; ``cause`` is the compactor's exception."""

    recoverability = "yes"

    def __init__(self, used: int, limit: int, cause: BaseException | str | None = None) -> None:
        super().__init__(f"Compaction failed at {used} of {limit} tokens: {cause}")
        self.args = (used, limit, cause)
        self.used = used
        self.limit = limit
        self.cause = cause


class CompactionStalled(AgentLoopError):
    """A compaction pass shaved nothing (``limit`` is the pre-pass size, ``used >= limit``)."""

    def __init__(self, used: int, limit: int) -> None:
        super().__init__(
            f"Compaction stalled: the pass left {used} tokens, not below {limit} before it"
        )
        self.args = (used, limit)
        self.used = used
        self.limit = limit


class LoopDetected(AgentLoopError):
    """The same operation repeated past the stop threshold, or convergence asked to stop."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.args = (message,)

    def __str__(self) -> str:
        return f"Loop detected: {self.message}"


class UserInputRequired(AgentLoopError):
    """Convergence asked for a human: ask the user, then run again."""

    recoverability = "human"


class ToolLimitReached(AgentLoopError):
    """A session or per-turn tool-call cap was hit."""

    recoverability = "config"

    def __str__(self) -> str:
        return f"Tool limit reached: {self.message}"


class ToolRecoveryExhausted(AgentLoopError):
    """A tool was retried past ``MAX_RECOVERY_ATTEMPTS``; ``attempts`` counts total calls."""

    def __init__(self, tool: str, attempts: int) -> None:
        super().__init__(
            f"Tool recovery exhausted: '{tool}' ran {attempts} times "
            f"(the original call and {attempts - 1} retries)"
        )
        self.args = (tool, attempts)
        self.tool = tool
        self.attempts = attempts


class OutputValidationFailed(AgentLoopError):
    """The model's answer failed the ``output_type`` past ``RunConfig.output_retries``.

    ``attempts`` counts the invalid answers (the first one plus every retry); ``errors`` is the
    validation text of the last one, as the model read it.
    """

    def __init__(self, attempts: int, errors: str) -> None:
        super().__init__(f"Output validation failed after {attempts} attempts: {errors}")
        self.args = (attempts, errors)
        self.attempts = attempts
        self.errors = errors


class FallbackExhausted(AgentLoopError):
    """Every model in the fallback chain is spent while cooldowns run (nothing was sent)."""

    recoverability = "wait"

    def __init__(self, retry_after: float | None = None) -> None:
        when = "" if retry_after is None else f"; retry after {retry_after:.1f}s"
        super().__init__(f"Every model in the fallback chain is unavailable{when}")
        self.args = (retry_after,)
        self.retry_after = retry_after


class Cancelled(AgentLoopError):
    """The cancel signal fired: a clean stop, partial results may exist."""

    recoverability = "n/a"

    def __init__(self) -> None:
        super().__init__("Agent cancelled")
        self.args = ()

    def is_cancelled(self) -> bool:
        """Always true: this is the cancellation error."""
        return True


class ReflectionError(AgentLoopError):
    """The failure-analysis cycle itself errored."""

    recoverability = "yes"

    def __str__(self) -> str:
        return f"Reflection error: {self.message}"


class MemoryBackendError(AgentLoopError):
    """A memory or storage backend failed."""

    recoverability = "depends"

    def __str__(self) -> str:
        return f"Memory error: {self.message}"


class PhaseFailed(AgentLoopError):
    """A named pipeline phase failed."""

    recoverability = "depends"

    def __init__(self, phase: str, message: str) -> None:
        super().__init__(f"Phase '{phase}' failed: {message}")
        self.args = (phase, message)
        self.phase = phase
        self.detail = message


class LockPoisoned(AgentLoopError):
    """A state machine's own update raised; its half-updated state must not be trusted."""

    def __init__(self, what: str) -> None:
        super().__init__(f"Lock poisoned: {what} state is no longer trustworthy")
        self.args = (what,)
        self.what = what


class InternalError(AgentLoopError):
    """The catch-all: if you see it, something deserves a bug report."""

    recoverability = "none"


class FailurePhase(enum.StrEnum):
    """Where a provider request failed."""

    CONNECT = "connect"
    TLS = "tls"
    PROXY = "proxy"
    SEND = "send"
    READ = "read"
    STATUS = "status"
    REDIRECT = "redirect"
    BODY = "body"


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """What one attempt of a provider request did."""

    attempt: int
    error_type: str | None
    status_code: int | None
    phase: FailurePhase | None
    request_sent: bool | None
    duration_seconds: float
    wait_seconds: float = 0.0


class ProviderError(AgentLoopError):
    """The provider or HTTP layer failed; attributes say where and whether it was sent."""

    retryable: ClassVar[bool] = False
    recoverability = "no"

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status_code: int | None = None,
        retry_after: float | None = None,
        request_id: str | None = None,
        phase: FailurePhase | str | None = None,
        request_sent: bool | None = None,
        redirect_host: str | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status_code = status_code
        self.retry_after = retry_after
        self.request_id = request_id
        self.phase = FailurePhase(phase) if phase is not None else None
        self.request_sent = request_sent
        self.redirect_host = redirect_host
        self.body = body
        self.attempts = 1
        self.retry_wait_seconds = 0.0
        self.attempt_log: tuple[AttemptRecord, ...] = ()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, provider={self.provider!r}, "
            f"status_code={self.status_code!r}, phase={self.phase!r}, "
            f"request_sent={self.request_sent!r})"
        )


class AuthError(ProviderError):
    """The credentials are missing or were rejected (401/403)."""

    recoverability = "config"


class BadRequestError(ProviderError):
    """The provider rejected the request as malformed (400); retrying repeats it."""


class ContextLengthExceeded(BadRequestError):
    """The provider rejected the prompt as too long for the model's context."""

    recoverability = "depends"


class ModelNotFound(ProviderError):
    """The model or endpoint does not exist (404)."""

    recoverability = "config"


class InsufficientCredits(ProviderError):
    """The account is out of credit or quota (402, or a quota 429); never retried."""

    recoverability = "human"


class UnexpectedRedirect(ProviderError):
    """The server answered with a 3xx; redirects are never followed."""

    recoverability = "config"


class RateLimited(ProviderError):
    """The provider throttled the request (429)."""

    retryable = True
    recoverability = "wait"


class RateLimitEscalation(RateLimited):
    """Rate limits persisted past the retry ladder; the request gave up on this model."""

    def __init__(
        self,
        attempts: int,
        retry_after: float | None = None,
        *,
        provider: str | None = None,
        status_code: int | None = 429,
        request_id: str | None = None,
    ) -> None:
        hint = "none" if retry_after is None else f"{retry_after:g}s"
        super().__init__(
            f"Rate-limit escalation after {attempts} retries (retry-after {hint})",
            provider=provider,
            status_code=status_code,
            retry_after=retry_after,
            request_id=request_id,
            phase=FailurePhase.STATUS,
            request_sent=True,
        )
        self.args = (attempts, retry_after)
        self.attempts = attempts


class ProviderUnavailable(ProviderError):
    """The provider could not be reached or failed on its side (refused, reset, 5xx)."""

    retryable = True
    recoverability = "yes"


class ProviderUnreachable(ProviderUnavailable):
    """A fault in the environment (DNS, TLS verification, proxy refusal): a retry fails alike."""

    retryable = False
    recoverability = "config"


class ProviderTimeout(ProviderError):
    """A connect or read timeout, or a 408."""

    retryable = True
    recoverability = "yes"


class ResponseInvalid(ProviderError):
    """The reply was unparseable or schema-invalid, or a stream ended without its terminal event.

    ``body`` keeps the raw text received.
    """

    retryable = True
    recoverability = "yes"


class StreamError(ProviderError):
    """A stream failed mid-way; ``partial`` holds the last complete message, if any."""

    recoverability = "yes"

    def __init__(self, message: str, *, partial: Any = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.partial = partial


_ALWAYS_RECOVERABLE: tuple[type[AgentLoopError], ...] = (
    ToolExecutionError,
    ContextExceeded,
    CompactionFailed,
    ReflectionError,
    StreamError,
    FallbackExhausted,
)


def _is_recoverable(error: AgentLoopError) -> bool:
    """The explicit recoverability table of the spec (section 4)."""
    if isinstance(error, _ALWAYS_RECOVERABLE):
        return True
    if isinstance(error, ProviderError):
        return type(error).retryable
    return False
