"""The system prompt: a string, or a function evaluated at the start of each run (SPEC 21).

``Agent(system=...)`` and its alias ``Agent(instructions=...)`` take a ``str``, ``None``, or a
callable ``fn(ctx) -> str`` (sync or async; ``ctx`` is a ``RunContext`` with ``deps``, ``run_id``
and ``session_id``; a function of no parameters is called without it). The function runs once
per run, before the first request, and its text is the run's system prompt for every turn.

Checked at construction (both names given, or a value of another kind, is a
``ConfigurationError``) and at run start: a function that raises ends the run with
``InternalError`` naming it (chained), one that returns something other than a ``str`` or
``None`` with ``ConfigurationError``; an ``AgentLoopError`` it raises ends the run as itself.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from agentloop.errors import AgentLoopError, ConfigurationError, InternalError
from agentloop.run import RunContext

__all__ = ["Instructions", "Prompt", "checked_system", "evaluate"]

Instructions: TypeAlias = (
    str | Callable[[RunContext[Any]], Awaitable[str | None] | str | None] | Callable[[], Any]
)
"""What ``system=`` / ``instructions=`` take: text, or a function of the run's context."""


Prompt: TypeAlias = Callable[[RunContext[Any]], Any]
"""A dynamic system prompt, called with the run's context (a no-argument function wrapped)."""


def checked_system(system: object, instructions: object) -> tuple[Any, Prompt | None]:
    """The system prompt of ``system=`` or ``instructions=`` (aliases), and its function if any.

    Returns ``(value, None)`` for text or None, ``(value, fn)`` for a function, where ``fn``
    always takes the ``RunContext``.
    """
    if system is not None and instructions is not None:
        raise ConfigurationError(
            "give the system prompt once: instructions= and system= are the same thing",
            field="instructions",
        )
    value = instructions if system is None else system
    if value is None or isinstance(value, str):
        return value, None
    if not callable(value):
        raise ConfigurationError(
            f"system/instructions must be a str or a function (ctx) -> str, got "
            f"{type(value).__name__}; join a list of parts yourself: '\\n\\n'.join(parts)",
            field="instructions",
        )
    if _arity(value):
        return value, value
    fn: Callable[[], Any] = value

    @functools.wraps(fn)
    def with_context(ctx: RunContext[Any]) -> Any:
        return fn()

    return value, with_context


def _arity(fn: Callable[..., Any]) -> int:
    """How many arguments ``fn`` takes: 1 (the ``RunContext``) or 0; else a clear error."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return 1  # a builtin or C callable: assume it takes the context
    required = [
        p
        for p in parameters
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    if len(required) > 1:
        raise ConfigurationError(
            f"the system/instructions function {_name(fn)} must take one argument, the run's "
            f"context (ctx: RunContext), not {len(required)}",
            field="instructions",
        )
    return 1 if positional or variadic else 0


async def evaluate(fn: Prompt, ctx: RunContext[Any]) -> str | None:
    """The text of a dynamic system prompt for one run."""
    try:
        value = fn(ctx)
        if inspect.isawaitable(value):
            value = await value
    except AgentLoopError:
        raise
    except Exception as exc:
        from agentloop.safety.redact import redact_secrets  # its patterns compile when needed

        raise InternalError(
            f"the system/instructions function {_name(fn)} raised {type(exc).__name__}: "
            f"{redact_secrets(str(exc))}"
        ) from exc
    if value is not None and not isinstance(value, str):
        raise ConfigurationError(
            f"the system/instructions function {_name(fn)} must return a str (or None), "
            f"got {type(value).__name__}",
            field="instructions",
        )
    return value


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
