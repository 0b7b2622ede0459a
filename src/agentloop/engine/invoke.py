"""Running one tool once: lookup, arguments, timeout, and whatever it does, as text and an outcome.

Nothing here raises for a tool's sake: a missing tool, invalid arguments, a timeout, a
``ToolError``, any exception (a panic, logged at WARNING with its traceback) and a value that
cannot be rendered all come back as the text the model reads plus an ``Outcome`` the pipeline
(``agentloop.engine.call``) and the tool breaker act on. Only cancellation and interpreter
exits leave.
"""

from __future__ import annotations

import asyncio
import logging
import time
import types
from collections.abc import Awaitable, Coroutine, Generator, Mapping
from types import CoroutineType
from typing import Any, Literal, TypeAlias

from agentloop._plain_args import plain_arguments
from agentloop._util.suggest import suggest
from agentloop.config import RunConfig
from agentloop.errors import RemoteAuthError, ToolError, ToolNotFound
from agentloop.messages import MAX_ARGUMENT_DEPTH
from agentloop.model import INVALID_JSON_KEY
from agentloop.safety.output import cut_to_fit, limit_output, storable
from agentloop.safety.redact import redact_secrets
from agentloop.tools import FunctionTool, Tool, ToolContext, ToolOutput, ToolRegistry, split_output

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "Outcome",
    "begin",
    "invoke",
    "said",
    "suggestion",
]

logger = logging.getLogger("agentloop")

Outcome: TypeAlias = Literal[
    "ok", "tool_error", "invalid", "sick", "missing", "vetoed", "refused", "looping", "unavailable"
]
"""How an attempt ended. The first five come from running the tool; ``vetoed`` (a hook or the
approver), ``refused`` (the breaker), ``looping`` (the loop detector's stop) and ``unavailable``
(a name the model was never offered) are decided before it would run."""


def suggestion(config: RunConfig, name: str, candidates: frozenset[str] | list[str]) -> str | None:
    """The close name to suggest for a miss, when ``suggest_tools`` is on."""
    if not config.suggest_tools:
        return None
    return suggest(name, sorted(candidates))


async def invoke(
    registry: ToolRegistry,
    config: RunConfig,
    ctx: ToolContext,
    name: str,
    arguments: Mapping[str, Any],
) -> tuple[str, Outcome]:
    """Run tool ``name`` once; its text (cut to the configured size) and outcome.

    ``begin``, awaited to the end when the tool waits.
    """
    begun = begin(registry.get(name), registry, config, ctx, name, arguments)
    return begun if isinstance(begun, tuple) else await begun


def begin(
    tool: Tool | None,
    registry: ToolRegistry,
    config: RunConfig,
    ctx: ToolContext,
    name: str,
    arguments: Mapping[str, Any],
) -> tuple[str, Outcome] | Coroutine[Any, Any, tuple[str, Outcome]]:
    """Run tool ``name`` up to its first wait: its text and outcome, or the rest to await.

    ``tool``: ``registry.get(name)``, as the caller looked it up (None: missing). No coroutine
    for a tool that answers without waiting (a lookup, a computation): an async ``@tool``
    function is run directly, without ``FunctionTool.call`` around it, up to its first wait
    without a timer (``_first_step``); what is left runs under ``asyncio.timeout_at``, the
    deadline taken before the tool started (``_timed_rest``).
    """
    if tool is None:
        return _missing(registry, config, name)
    plain = tool._plain if type(tool) is FunctionTool else None  # ``_checked``'s common case
    valid: Mapping[str, Any] | None = (  # (a field's name never starts with "_", so it is
        None if plain is None else plain_arguments(plain, arguments)  # never ``INVALID_JSON_KEY``)
    )
    if valid is None:
        problem, valid = _checked(tool, name, arguments)
        if problem is not None:
            return problem, "invalid"
    seconds = tool.timeout if tool.timeout is not None else config.tool_timeout
    if not seconds:
        return _untimed(config, tool, ctx, valid, seconds)
    loop = asyncio.get_running_loop()  # the stock loop's ``time()`` without its Python call
    deadline = (time.monotonic() if type(loop).time is _LOOP_TIME else loop.time()) + seconds
    try:
        if type(tool) is FunctionTool and tool.is_async:  # ``_called``, written out
            called = tool.func(ctx, **valid) if tool.takes_context else tool.func(**valid)
        else:
            called = tool.call(valid, ctx)
        output = _first_step(called)
    except BaseException as exc:
        return _ended(config, tool, ctx, seconds, exc)
    if type(output) is _Waits:  # it waits for something: the rest runs under the deadline
        return _timed_rest(config, tool, ctx, seconds, output, deadline)
    if type(output) is str and output.isascii():  # the common value: ``_rendered``, ``storable``
        ctx.media = ()  # agree, without their calls
        if not config.max_tool_output_chars and len(output) <= config.context_window:
            return output, "ok"  # nothing ``_fitted`` would cut
        return _fitted(config, output), "ok"
    content, outcome = _rendered(tool.name, output, ctx)
    return _fitted(config, storable(content)), outcome


def _missing(registry: ToolRegistry, config: RunConfig, name: str) -> tuple[str, Outcome]:
    """A call to a tool the registry does not have: the model reads its names."""
    names = registry.names()
    text = str(ToolNotFound(name, names))
    hint = suggestion(config, name, names)
    return (f"{text}. Did you mean '{hint}'?" if hint else text), "missing"


_LOOP_TIME = asyncio.BaseEventLoop.time
"""The stock event loops' clock, ``time.monotonic()``: read directly, one Python call fewer."""


async def _untimed(
    config: RunConfig, tool: Tool, ctx: ToolContext, valid: Mapping[str, Any], seconds: float | None
) -> tuple[str, Outcome]:
    """A tool without a timeout, awaited whole."""
    try:
        output = await _called(tool, valid, ctx)
    except BaseException as exc:
        return _ended(config, tool, ctx, seconds, exc)
    content, outcome = _rendered(tool.name, output, ctx)
    return _fitted(config, storable(content)), outcome


async def _timed_rest(
    config: RunConfig, tool: Tool, ctx: ToolContext, seconds: float, waits: _Waits, deadline: float
) -> tuple[str, Outcome]:
    """What is left of a tool that waited, under its deadline."""
    try:
        async with asyncio.timeout_at(deadline) as scope:
            try:
                output = await waits.rest
            except TimeoutError as raised:
                if scope.expired():
                    raise
                raise _ToolRaisedTimeout() from raised
    except BaseException as exc:
        return _ended(config, tool, ctx, seconds, exc)
    content, outcome = _rendered(tool.name, output, ctx)
    return _fitted(config, storable(content)), outcome


def _ended(
    config: RunConfig, tool: Tool, ctx: ToolContext, seconds: float | None, exc: BaseException
) -> tuple[str, Outcome]:
    """What the model reads of a call that raised ``exc``; ``exc`` raised on when it is hard."""
    failed = _failed(tool, ctx, seconds, exc)
    if failed is None:
        raise exc  # a cancel, an interpreter exit, a remote agent refusing our credentials
    content, outcome = failed
    return _fitted(config, storable(content)), outcome


def _checked(
    tool: Tool, name: str, arguments: Mapping[str, Any]
) -> tuple[str | None, Mapping[str, Any]]:
    """The problem with ``arguments`` (None when valid), and what the tool is called with."""
    if INVALID_JSON_KEY in arguments and len(arguments) == 1:
        return (
            f"Invalid arguments for tool '{name}': arguments: not valid JSON: "
            f"{arguments[INVALID_JSON_KEY]!s:.200}"
        ), arguments
    plain = tool._plain if type(tool) is FunctionTool else None
    if plain is not None:  # every parameter a plain ``str``: what the validator would answer
        valid = plain_arguments(plain, arguments)
        if valid is not None:
            return None, valid
    for value in arguments.values():  # ``_private_copy``'s look, written out: flat arguments
        if type(value) not in _SCALARS and isinstance(value, _CONTAINERS):  # are copied here
            private = _private_copy(arguments)
            break
    else:
        private = dict(arguments)
    if private is None:
        return (
            f"Invalid arguments for tool '{name}': arguments: nested more than "
            f"{MAX_ARGUMENT_DEPTH} levels deep"
        ), arguments
    try:
        return None, tool.validate(private)
    except ToolError as exc:
        return exc.message, arguments
    except RecursionError:
        return f"Invalid arguments for tool '{name}': arguments: nested too deeply", arguments


def _fitted(config: RunConfig, content: str) -> str:
    """The result cut to ``max_tool_output_chars``, or to the context window's share."""
    limit = config.max_tool_output_chars
    if limit:
        return limit_output(content, limit)
    window = config.context_window
    if window and len(content) > window:  # ~a quarter of the window at ~4 chars per token
        return cut_to_fit(content, window)
    return content


def _called(tool: Tool, valid: Mapping[str, Any], ctx: ToolContext) -> Any:
    """The awaitable of one call: an async ``@tool`` function's own coroutine, else ``call``."""
    if type(tool) is FunctionTool and tool.is_async:
        return tool.func(ctx, **valid) if tool.takes_context else tool.func(**valid)
    return tool.call(valid, ctx)


class _Waits:
    """A tool that waits for something: ``rest``, what is left of it to await."""

    __slots__ = ("rest",)

    def __init__(self, rest: Awaitable[Any]) -> None:
        self.rest = rest


def _first_step(called: Awaitable[Any]) -> Any:
    """Run a tool's coroutine up to its first wait: its value if it never waits, else ``_Waits``.

    A deadline can only cut a tool where it waits, so a tool that answers without waiting (a
    lookup, a computation) needs no timer: that saves the ``asyncio.timeout`` scope (a timer
    handle scheduled and cancelled, about 30,000 instructions a call). A ``TimeoutError`` it
    raises is its own (``_ToolRaisedTimeout``). Another awaitable than a coroutine: all of it.
    """
    if type(called) is not CoroutineType:
        return _Waits(called)
    try:
        waited = called.send(None)
    except StopIteration as returned:
        return returned.value
    except TimeoutError as raised:
        raise _ToolRaisedTimeout() from raised
    return _Waits(_rest(called, waited))


@types.coroutine
def _rest(called: Coroutine[Any, Any, Any], waited: Any) -> Generator[Any, Any, Any]:
    """The rest of a coroutine that yielded ``waited``: awaited as ``await called`` would go on.

    What the task sends or throws in reaches the coroutine; what it yields reaches the task.
    """
    while True:
        try:
            sent = yield waited
        except GeneratorExit:
            called.close()
            raise
        except BaseException as exc:  # a cancel, or the deadline's
            try:
                waited = called.throw(exc)
            except StopIteration as returned:
                return returned.value
        else:
            try:
                waited = called.send(sent)
            except StopIteration as returned:
                return returned.value


class _ToolRaisedTimeout(Exception):
    """A tool raised TimeoutError itself (a panic, not our deadline)."""


def _failed(
    tool: Tool, ctx: ToolContext, seconds: float | None, exc: BaseException
) -> tuple[str, Outcome] | None:
    """What the model reads for a call that raised ``exc``; None: it is raised on.

    The deadline's expiry is a timeout; a ``TimeoutError`` the tool raised itself before its
    deadline is a panic (one raised with no deadline reads as a timeout, as it always did).
    """
    if isinstance(exc, ToolError):  # sick=True: the tool's own failure, counted by the breaker
        return exc.message, "sick" if exc.sick else "tool_error"
    if isinstance(exc, _ToolRaisedTimeout):
        cause = exc.__cause__ or TimeoutError()
        _log_panic(tool.name, ctx.call_id, cause)
        return _panic_text(tool.name, cause), "sick"
    if isinstance(exc, TimeoutError):
        return _timed_out(tool.name, ctx, seconds, exc)
    if isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError, RemoteAuthError)):
        return None  # a remote agent refusing our credentials is hard (SPEC 3, 26)
    _log_panic(tool.name, ctx.call_id, exc)  # GeneratorExit, a custom BaseException: a panic
    return _panic_text(tool.name, exc), "sick"


def _timed_out(
    name: str, ctx: ToolContext, seconds: float | None, exc: BaseException
) -> tuple[str, Outcome]:
    logger.warning(
        "tool '%s' (call %s) timed out after %ss",
        name,
        ctx.call_id,
        _seconds(seconds),
        exc_info=exc,
    )
    return f"Tool '{name}' timed out after {_seconds(seconds)}s", "sick"


_SCALARS = frozenset({str, int, float, bool, type(None)})
"""Types a decoded argument usually has, never a container (an exact type check is cheap)."""
_CONTAINERS = (Mapping, list)


def _private_copy(arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy the tool may mutate without rewriting the recorded call; None when too deep.

    Containers are copied (iteratively, so depth never costs the interpreter's stack); scalars
    are immutable and shared. Only JSON shapes (dict, list) occur in decoded arguments.
    """
    for value in arguments.values():
        if type(value) not in _SCALARS and isinstance(value, _CONTAINERS):
            break
    else:
        return dict(arguments)  # flat: a shallow copy is a private copy
    top: dict[str, Any] = {}
    stack: list[tuple[Any, Any, int]] = [(arguments, top, 1)]
    while stack:
        source, target, depth = stack.pop()
        items = source.items() if isinstance(source, Mapping) else enumerate(source)
        for key, value in items:
            if isinstance(value, _CONTAINERS):
                if depth >= MAX_ARGUMENT_DEPTH:
                    return None
                copy: Any = {} if isinstance(value, Mapping) else [None] * len(value)
                stack.append((value, copy, depth + 1))
                value = copy
            target[key] = value
    return top


def _rendered(name: str, output: Any, ctx: ToolContext) -> tuple[str, Outcome]:
    """The text of a tool's return value; its media go to ``ctx.media``.

    A value that cannot be rendered is a panic.
    """
    if type(output) is str:  # the common value: its text, no media
        ctx.media = ()
        return output, "ok"
    try:
        if isinstance(output, ToolOutput):
            text, ctx.media = split_output(output.content)
            return text, "tool_error" if output.is_error else "ok"
        text, ctx.media = split_output(output)
        return text, "ok"
    except Exception as exc:
        _log_panic(name, ctx.call_id, exc)
        return _panic_text(name, exc), "sick"


def _log_panic(name: str, call_id: str, exc: BaseException) -> None:
    """A tool bug is the developer's business too: WARNING with the traceback."""
    logger.warning(
        "tool '%s' (call %s) panicked: %s", name, call_id, type(exc).__name__, exc_info=exc
    )


def _seconds(timeout: float | None) -> str:
    """Whole seconds, truncated (SPEC section 3): 1.5 -> "1", 0.05 -> "0"."""
    return str(int(timeout or 0))


def said(value: object, *, as_repr: bool = False) -> str:
    """User code's ``str()`` (or ``repr()``) of a value, secrets redacted; never raises.

    An exception, a hook's answer or a tool's value is user code: a broken ``__str__`` or
    ``__repr__`` must not end the run, so it reads ``<exception str() failed>`` (or ``<value
    repr() failed>``, and so on).
    """
    try:
        text = repr(value) if as_repr else str(value)
    except Exception:
        kind = "exception" if isinstance(value, BaseException) else "value"
        text = f"<{kind} {'repr' if as_repr else 'str'}() failed>"
    return redact_secrets(text)


def _panic_text(name: str, exc: BaseException) -> str:
    message = said(exc)
    kind = type(exc).__name__
    return (
        f'Tool "{name}" panicked: {kind}: {message}'
        if message
        else f'Tool "{name}" panicked: {kind}'
    )
