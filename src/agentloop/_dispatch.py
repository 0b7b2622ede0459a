"""The per-call pipeline: every tool call becomes a result, soft errors included.

Per attempt, in order: ``on_tool_pre`` → pre-tool hooks (a veto is soft, no recovery) → loop
pre-check → tool breaker gate → dispatch (lookup, validation, timeout, exception capture) →
loop-detector record → ``on_tool_post`` → post-tool hooks → breaker record → recovery decision
(a retry re-runs this whole list). Only the engine ends runs: a tool never can.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from agentloop import events as ev
from agentloop._safety import BREAKER_TEXT, SafetyState
from agentloop._suggest import suggest
from agentloop._turn import RunState
from agentloop.config import RunConfig
from agentloop.errors import (
    AgentLoopError,
    InternalError,
    ToolError,
    ToolLimitReached,
    ToolNotFound,
    ToolRecoveryExhausted,
)
from agentloop.hooks import Allow, Approver, Ask, Block, Hook, overrides
from agentloop.messages import ToolCallPart, ToolResultPart
from agentloop.observers import EventBus
from agentloop.safety.breaker import Outcome as BreakerOutcome
from agentloop.safety.output import cut_to_fit, limit_output, storable
from agentloop.safety.recovery import (
    MAX_RECOVERY_ATTEMPTS,
    Correction,
    ExponentialBackoffRecovery,
    NoopReflector,
    RecoveryAction,
    Retry,
    ToolFailure,
)
from agentloop.safety.redact import redact_secrets
from agentloop.tools import Tool, ToolContext, ToolOutput, ToolRegistry, render_content

__all__ = ["INVALID_JSON_KEY", "Dispatcher", "Outcome"]

logger = logging.getLogger("agentloop")

_BREAKER_OUTCOME: dict[str, BreakerOutcome | None] = {
    "ok": "success",
    "sick": "sick",
    "tool_error": "neutral",
    "invalid": "neutral",
    "missing": None,
}

INVALID_JSON_KEY = "__invalid_json__"
"""Adapters put a tool call's undecodable argument text under this key."""

Outcome: TypeAlias = Literal["ok", "vetoed", "refused", "missing", "invalid", "tool_error", "sick"]


@dataclass(frozen=True, slots=True)
class _Attempt:
    result: ToolResultPart
    outcome: Outcome


class Dispatcher:
    """Runs a turn's tool calls through the pipeline."""

    def __init__(
        self,
        *,
        registry: ToolRegistry,
        config: RunConfig,
        hooks: Sequence[Hook],
        observers: EventBus,
        approver: Approver | None,
        session_id: str,
        safety: SafetyState,
    ) -> None:
        self.safety = safety
        self.registry = registry
        self.config = config
        self.observers = observers
        self.approver = approver
        self.session_id = session_id
        self.pre_hooks = tuple(h for h in hooks if overrides(h, Hook, "pre_tool"))
        self.post_hooks = tuple(h for h in hooks if overrides(h, Hook, "post_tool"))
        # the stock pair always fails at once; exact types, so a subclass's override still runs
        self.default_recovery = (
            type(config.reflector) is NoopReflector
            and type(config.recovery) is ExponentialBackoffRecovery
        )

    async def dispatch_turn(
        self, state: RunState, calls: Sequence[ToolCallPart]
    ) -> list[ToolResultPart]:
        """Every call's result, in the model's order."""
        self._check_limits(state, calls)
        state.tool_calls += len(calls)
        bus = self.observers
        if bus.active:
            for call in calls:
                bus.emit(ev.ToolCallRequested(state.run.id, state.turn_index, call))
        results: list[ToolResultPart | None] = [None] * len(calls)
        runnable: list[int] = []
        for index, call in enumerate(calls):
            if call.name in state.advertised:
                runnable.append(index)
            else:
                results[index] = self._not_available(state, call)
        self.safety.budget_tool_calls(len(calls))
        if self.config.parallel_tool_calls and len(runnable) > 1:
            await self._run_parallel(state, calls, runnable, results)
        else:
            for index in runnable:
                state.check_cancel()
                results[index] = await self.execute(state, calls[index])
        return [
            r
            if r is not None
            else ToolResultPart(c.id, c.name, "dispatch produced no result", True)
            for r, c in zip(results, calls, strict=True)
        ]

    def _check_limits(self, state: RunState, calls: Sequence[ToolCallPart]) -> None:
        per_turn = self.config.max_tool_calls_per_turn
        if per_turn is not None and len(calls) > per_turn:
            raise ToolLimitReached(
                f"turn tool-call limit of {per_turn} reached ({len(calls)} calls requested)"
            )
        total = self.config.max_tool_calls
        if total is not None and state.tool_calls + len(calls) > total:
            raise ToolLimitReached(
                f"run tool-call limit of {total} reached "
                f"({state.tool_calls} made, {len(calls)} more requested)"
            )

    async def _run_parallel(
        self,
        state: RunState,
        calls: Sequence[ToolCallPart],
        runnable: list[int],
        results: list[ToolResultPart | None],
    ) -> None:
        semaphore = asyncio.Semaphore(min(self.config.max_concurrency, len(runnable)))
        failures: dict[int, AgentLoopError] = {}

        async def one(index: int) -> None:
            async with semaphore:
                try:
                    results[index] = await self.execute(state, calls[index])
                except AgentLoopError as error:
                    failures[index] = error

        try:
            async with asyncio.TaskGroup() as group:
                for index in runnable:
                    group.create_task(one(index))
        except BaseExceptionGroup as group_error:
            raise _first_error(group_error) from None
        if failures:
            raise failures[min(failures)]

    def _not_available(self, state: RunState, call: ToolCallPart) -> ToolResultPart:
        stop = self.safety.loop_stop()
        if stop is not None:
            raise stop
        text = f"tool '{call.name}' is not available"
        hint = self._suggestion(call.name, state.advertised)
        if hint:
            text += f". Did you mean '{hint}'?"
        self.safety.loop_record(
            state.run, call.name, call.arguments, text, is_error=True, available=False
        )
        return ToolResultPart(call.id, call.name, text, True)

    def _suggestion(self, name: str, candidates: frozenset[str] | list[str]) -> str | None:
        if not self.config.suggest_tools:
            return None
        return suggest(name, sorted(candidates))

    async def execute(self, state: RunState, call: ToolCallPart) -> ToolResultPart:
        """One call through the pipeline, with recovery; returns the result the model reads."""
        name, arguments = call.name, call.arguments
        attempt = 0
        while True:
            outcome = await self._attempt(state, call, name, arguments, attempt)
            if outcome.outcome in ("ok", "vetoed", "refused"):
                return outcome.result
            action, correction = await self._decide(name, arguments, outcome.result, attempt)
            if not isinstance(action, Retry):
                return outcome.result
            attempt += 1
            if attempt > MAX_RECOVERY_ATTEMPTS:
                raise ToolRecoveryExhausted(call.name, attempt)
            if action.delay > 0:
                await asyncio.sleep(action.delay)
            name, arguments = _apply(correction, name, arguments)

    async def _attempt(
        self,
        state: RunState,
        call: ToolCallPart,
        name: str,
        arguments: Mapping[str, Any],
        attempt: int,
    ) -> _Attempt:
        run = state.run
        ctx = ToolContext(
            run_id=run.id,
            turn=state.turn_index,
            call_id=call.id,
            tool_name=name,
            cancel=state.tokens[-1],
            session_id=self.session_id,
            deps=state.deps,
        )
        ctx._link = (state, self)
        if self.observers.active:
            self.observers.emit(ev.ToolCallStarted(run.id, state.turn_index, call, attempt))
        veto = await self._pre_hooks(call, ctx) if self.pre_hooks else None
        if veto is not None:
            return self._vetoed(state, call, name, arguments, attempt, veto)
        self._refuse_if_looping(state, call, attempt)
        admission = self.safety.admit(name)
        if admission is None:
            return self._refused(state, call, name, arguments, attempt)
        started = time.perf_counter()
        try:
            content, outcome = await self._invoke(state, ctx, name, arguments)
        except BaseException:
            self.safety.settle(admission, None)
            raise
        duration = time.perf_counter() - started
        result = ToolResultPart(call.id, call.name, content, outcome != "ok")
        self.safety.loop_record(
            run, name, arguments, content, is_error=result.is_error, available=outcome != "missing"
        )
        self._finished(state, call, result, attempt, duration)
        try:
            await self._post_hooks(call, result, ctx)
        finally:  # the tool ran: a failing or cancelled post hook must not leave a probe hanging
            self.safety.settle(admission, _BREAKER_OUTCOME[outcome])
        return _Attempt(result, outcome)

    async def _post_hooks(
        self, call: ToolCallPart, result: ToolResultPart, ctx: ToolContext
    ) -> None:
        for hook in self.post_hooks:
            await hook.post_tool(call, result, ctx)

    def _refuse_if_looping(self, state: RunState, call: ToolCallPart, attempt: int) -> None:
        """The loop pre-check: at the stop threshold the call is refused and the run ends."""
        stop = self.safety.loop_stop()
        if stop is not None:
            refused = ToolResultPart(
                call.id, call.name, f"dispatch refused before execution: {stop}", True
            )
            self._finished(state, call, refused, attempt, 0.0)
            raise stop

    def _vetoed(
        self,
        state: RunState,
        call: ToolCallPart,
        name: str,
        arguments: Mapping[str, Any],
        attempt: int,
        veto: str,
    ) -> _Attempt:
        """A hook vetoed the call: soft, never recovered, counted by the loop detector.

        A model that keeps asking for a blocked call is stuck too (SPEC 6: every soft result
        counts), so the pre-check runs for vetoed calls as well.
        """
        self._refuse_if_looping(state, call, attempt)
        result = ToolResultPart(call.id, call.name, veto, True)
        self.safety.loop_record(state.run, name, arguments, veto, is_error=True)
        self._finished(state, call, result, attempt, 0.0)
        return _Attempt(result, "vetoed")

    def _refused(
        self,
        state: RunState,
        call: ToolCallPart,
        name: str,
        arguments: Mapping[str, Any],
        attempt: int,
    ) -> _Attempt:
        """The breaker refused: a soft result, counted by the loop detector, never recovered."""
        result = ToolResultPart(call.id, call.name, BREAKER_TEXT, True)
        self.safety.loop_record(state.run, name, arguments, BREAKER_TEXT, is_error=True)
        self._finished(state, call, result, attempt, 0.0)
        return _Attempt(result, "refused")

    def _finished(
        self,
        state: RunState,
        call: ToolCallPart,
        result: ToolResultPart,
        attempt: int,
        duration: float,
    ) -> None:
        if self.observers.active:
            self.observers.emit(
                ev.ToolCallFinished(state.run.id, state.turn_index, call, result, attempt, duration)
            )

    async def _pre_hooks(self, call: ToolCallPart, ctx: ToolContext) -> str | None:
        """The veto text of the first Block/Ask, or None to proceed. Fails closed.

        An answer that is not a decision blocks the call; an approver's answer other than
        ``True`` denies it; an approver that raises denies it. Each is logged.
        """
        for hook in self.pre_hooks:
            try:
                decision = await hook.pre_tool(call, ctx)
            except Exception as exc:
                raise InternalError(
                    f"hook {type(hook).__name__} raised in pre_tool for tool '{call.name}' "
                    f"(the call did not run): {type(exc).__name__}: {exc}"
                ) from exc
            if decision is None or isinstance(decision, Allow):
                continue
            if isinstance(decision, Block):
                return decision.reason
            if isinstance(decision, Ask):
                if self.approver is None:
                    return decision.message
                denial = await self._approve(call, decision.message)
                if denial is None:
                    continue
                return denial
            logger.error(
                "hook %s returned %r for tool '%s' (call %s), not a decision; the call is blocked",
                type(hook).__name__,
                decision,
                call.name,
                call.id,
            )
            return f"blocked: hook {type(hook).__name__} returned {decision!r}, not a decision"
        return None

    async def _approve(self, call: ToolCallPart, message: str) -> str | None:
        """None when the approver answered exactly ``True``; else the denial the model reads."""
        assert self.approver is not None
        try:
            answer = self.approver(call, message)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            logger.error(
                "approver raised for tool '%s' (call %s); the call is denied",
                call.name,
                call.id,
                exc_info=True,
            )
            return f"approval failed: {type(exc).__name__}: {exc}"
        if answer is True:
            return None
        if answer is not False:
            logger.warning(
                "approver answered %r for tool '%s' (call %s), not True; the call is denied",
                answer,
                call.name,
                call.id,
            )
        return "User denied permission"

    async def _invoke(
        self, state: RunState, ctx: ToolContext, name: str, arguments: Mapping[str, Any]
    ) -> tuple[str, Outcome]:
        tool = self.registry.get(name)
        if tool is None:
            names = self.registry.names()
            text = str(ToolNotFound(name, names))
            hint = self._suggestion(name, names)
            return (f"{text}. Did you mean '{hint}'?" if hint else text), "missing"
        if INVALID_JSON_KEY in arguments and len(arguments) == 1:
            return (
                f"Invalid arguments for tool '{name}': arguments: not valid JSON: "
                f"{arguments[INVALID_JSON_KEY]!s:.200}"
            ), "invalid"
        private = _private_copy(arguments)
        if private is None:
            return (
                f"Invalid arguments for tool '{name}': arguments: nested more than "
                f"{MAX_ARGUMENT_DEPTH} levels deep"
            ), "invalid"
        try:
            valid = tool.validate(private)
        except ToolError as exc:
            return exc.message, "invalid"
        except RecursionError:
            return f"Invalid arguments for tool '{name}': arguments: nested too deeply", "invalid"
        content, outcome = await self._run_tool(tool, valid, ctx)
        content = storable(content)
        limit = self.config.max_tool_output_chars
        if limit:
            return limit_output(content, limit), outcome
        window = self.config.context_window
        if window and len(content) > window:  # ~a quarter of the window at ~4 chars per token
            return cut_to_fit(content, window), outcome
        return content, outcome

    async def _run_tool(
        self, tool: Tool, arguments: Mapping[str, Any], ctx: ToolContext
    ) -> tuple[str, Outcome]:
        timeout = tool.timeout if tool.timeout is not None else self.config.tool_timeout
        try:
            if timeout:
                async with asyncio.timeout(timeout) as scope:
                    try:
                        output = await tool.call(arguments, ctx)
                    except TimeoutError as raised:
                        if scope.expired():
                            raise
                        raise _ToolRaisedTimeout() from raised
            else:
                output = await tool.call(arguments, ctx)
        except ToolError as exc:  # sick=True: the tool's own failure, counted by the breaker
            return exc.message, "sick" if exc.sick else "tool_error"
        except _ToolRaisedTimeout as exc:
            cause = exc.__cause__ or TimeoutError()
            _log_panic(tool.name, ctx.call_id, cause)
            return _panic_text(tool.name, cause), "sick"
        except TimeoutError as exc:
            logger.warning(
                "tool '%s' (call %s) timed out after %ss",
                tool.name,
                ctx.call_id,
                _seconds(timeout),
                exc_info=exc,
            )
            return f"Tool '{tool.name}' timed out after {_seconds(timeout)}s", "sick"
        except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
            raise
        except BaseException as exc:  # GeneratorExit, a custom BaseException: still a panic
            _log_panic(tool.name, ctx.call_id, exc)
            return _panic_text(tool.name, exc), "sick"
        return _rendered(tool.name, output, ctx.call_id)

    async def _decide(
        self, name: str, arguments: Mapping[str, Any], result: ToolResultPart, attempt: int
    ) -> tuple[RecoveryAction | None, Correction | None]:
        """The recovery action for a failed attempt (None when a reflector or strategy raised)."""
        if self.default_recovery:
            return None, None
        tool = self.registry.get(name)
        failure = ToolFailure(
            tool=name,
            arguments=arguments,
            error_text=result.content,
            schema=tool.parameters if tool else None,
            attempt=attempt,
            max_attempts=MAX_RECOVERY_ATTEMPTS,
            validate=_validator(tool),
        )
        try:
            analysis = await self.config.reflector.analyze(failure)
            action = self.config.recovery.decide(analysis, attempt, MAX_RECOVERY_ATTEMPTS)
        except Exception:
            logger.warning("recovery for tool '%s' raised; treated as Fail", name, exc_info=True)
            return None, None
        return action, analysis.correction


MAX_ARGUMENT_DEPTH = 64
"""Tool arguments nested deeper than this are a soft invalid-arguments result."""


def _private_copy(arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy the tool may mutate without rewriting the recorded call; None when too deep.

    Containers are copied (iteratively, so depth never costs the interpreter's stack); scalars
    are immutable and shared. Only JSON shapes (dict, list) occur in decoded arguments.
    """
    if not any(isinstance(v, Mapping | list) for v in arguments.values()):
        return dict(arguments)  # flat: a shallow copy is a private copy
    top: dict[str, Any] = {}
    stack: list[tuple[Any, Any, int]] = [(arguments, top, 1)]
    while stack:
        source, target, depth = stack.pop()
        items = source.items() if isinstance(source, Mapping) else enumerate(source)
        for key, value in items:
            if isinstance(value, Mapping | list):
                if depth >= MAX_ARGUMENT_DEPTH:
                    return None
                copy: Any = {} if isinstance(value, Mapping) else [None] * len(value)
                stack.append((value, copy, depth + 1))
                value = copy
            target[key] = value
    return top


def _rendered(name: str, output: Any, call_id: str) -> tuple[str, Outcome]:
    """The text of a tool's return value; a value that cannot be rendered is a panic."""
    try:
        if isinstance(output, ToolOutput):
            return render_content(output.content), "tool_error" if output.is_error else "ok"
        return render_content(output), "ok"
    except Exception as exc:
        _log_panic(name, call_id, exc)
        return _panic_text(name, exc), "sick"


def _log_panic(name: str, call_id: str, exc: BaseException) -> None:
    """A tool bug is the developer's business too: WARNING with the traceback."""
    logger.warning(
        "tool '%s' (call %s) panicked: %s", name, call_id, type(exc).__name__, exc_info=exc
    )


class _ToolRaisedTimeout(Exception):
    """A tool raised TimeoutError itself (a panic, not our deadline)."""


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            return _first_error(error)
        if not isinstance(error, asyncio.CancelledError):
            return error
    return group.exceptions[0]


def _seconds(timeout: float | None) -> str:
    """Whole seconds, truncated (SPEC section 3): 1.5 -> "1", 0.05 -> "0"."""
    return str(int(timeout or 0))


def _panic_text(name: str, exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # a tool's broken __str__ must not end the run
        text = "<exception str() failed>"
    message = redact_secrets(text)
    kind = type(exc).__name__
    return (
        f'Tool "{name}" panicked: {kind}: {message}'
        if message
        else f'Tool "{name}" panicked: {kind}'
    )


def _validator(tool: Tool | None) -> Callable[[Mapping[str, Any]], str | None] | None:
    if tool is None:
        return None

    def check(arguments: Mapping[str, Any]) -> str | None:
        try:
            tool.validate(arguments)
        except ToolError as exc:
            return exc.message
        return None

    return check


def _apply(
    correction: Correction | None, name: str, arguments: Mapping[str, Any]
) -> tuple[str, Mapping[str, Any]]:
    """Apply a correction to the retry's input (never to the recorded history)."""
    if correction is None:
        return name, arguments
    if correction.kind == "input_fix" and correction.arguments is not None:
        return name, dict(correction.arguments)
    if correction.kind == "tool_change" and correction.tool:
        return correction.tool, arguments
    return name, arguments
