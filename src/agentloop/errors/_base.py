"""The base of the tree, ``ConversationSummary``, and the errors of runs, tools and config.

Imports nothing of ours: ``agentloop.errors`` is the bottom layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """Where a conversation stood when an error ended its run."""

    run_id: str
    turns_completed: int
    tool_calls: int
    messages: int
    input_tokens: int
    output_tokens: int
    last_model: str | None

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return dataclasses.asdict(self)


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
    _always_recoverable: ClassVar[bool] = False
    """The spec's table (section 4): errors another attempt may cure, whatever their cause."""
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
        return self._always_recoverable

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
    _always_recoverable = True

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
    _always_recoverable = True

    def __init__(self, used: int, limit: int) -> None:
        super().__init__(f"Context window exceeded: used {used} of {limit} tokens")
        self.args = (used, limit)
        self.used = used
        self.limit = limit


class CompactionFailed(AgentLoopError):
    """A compaction pass raised; ``cause`` is the compactor's exception."""

    recoverability = "yes"
    _always_recoverable = True

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


class ModelRefused(AgentLoopError):
    """The provider refused or blocked the reply (SPEC 16): a refusal is never an answer.

    ``reason`` is the provider's own word (``"refusal"``, ``"content_filter"``, ``"SAFETY"``,
    a Gemini block reason, ...); ``text`` is whatever the model said before it ("" when
    nothing). Not recoverable: never retried, never a reason to fall back, never counted
    against a model's health.
    """

    recoverability = "human"

    def __init__(self, reason: str, text: str = "") -> None:
        said = f": {text}" if text else ""
        super().__init__(f"The model refused ({reason}){said}")
        self.args = (reason, text)
        self.reason = reason
        self.text = text


class GuardrailTripped(AgentLoopError):
    """An input or output guardrail tripped (SPEC 19): a gate said no, or could not say yes.

    ``guardrail`` is the guardrail's name; ``reason`` is why: the check's own words, or what
    went wrong with the check (it raised, timed out, or answered something other than None or a
    str). Not recoverable: the same input or answer trips again; a person decides what next.
    """

    recoverability = "human"

    def __init__(self, guardrail: str, reason: str) -> None:
        super().__init__(f"Guardrail '{guardrail}' tripped: {reason}")
        self.args = (guardrail, reason)
        self.guardrail = guardrail
        self.reason = reason


class HandoffLimitExceeded(AgentLoopError):
    """A run handed off more than ``RunConfig.max_handoffs`` times (SPEC 26)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} handoffs in one run")
        self.args = (limit,)
        self.limit = limit


class RemoteAuthError(AgentLoopError):
    """A remote agent or tool server refused our credentials (HTTP 401/403; SPEC 13, 26).

    Hard, unlike the remote's other failures: no retry or other model cures a wrong key.
    ``agent`` names the remote, ``status`` is the HTTP status.
    """

    recoverability = "config"

    def __init__(self, agent: str, status: int) -> None:
        super().__init__(f"remote agent '{agent}' refused our credentials (HTTP {status})")
        self.args = (agent, status)
        self.agent = agent
        self.status = status


class FallbackExhausted(AgentLoopError):
    """Every model in the fallback chain is spent while cooldowns run (nothing was sent)."""

    recoverability = "wait"
    _always_recoverable = True

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
    _always_recoverable = True

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
