"""A turn's tool calls: ``ToolCallRequested``, the limits gate, then each call's pipeline.

Calls to names the model was never offered, and calls cut at the output limit, are answered at
once (soft, each with its ``ToolCallStarted``/``ToolCallFinished``); the rest run through
``agentloop.engine.call.CallPipeline``, one after another or, with ``parallel_tool_calls``, at most
``max_concurrency`` at a time. Results come back in the model's order; a call left pending
(SPEC 17) comes back as its ``PendingCall``, the turn's other calls run all the same. When a
cancel or a hard error ends the turn, every call it cut or never reached still gets its
``ToolCallFinished`` (``INTERRUPTED_TEXT``, as ``finalize`` records it): a UI never shows a call
that never finishes (SPEC 12).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentloop._util.lazy import lazy_module
from agentloop.clock import Clock
from agentloop.config import RunConfig
from agentloop.engine.call import CallPipeline, PausedChild
from agentloop.engine.gates import Gates
from agentloop.engine.guards import SafetyState
from agentloop.engine.invoke import Outcome
from agentloop.engine.state import RunState
from agentloop.errors import AgentLoopError, Cancelled
from agentloop.hooks import Approver, Hook
from agentloop.messages import ToolCallPart, ToolResultPart
from agentloop.observers import EventBus
from agentloop.pausing import Decision, PendingCall
from agentloop.safety.budget import BudgetGate
from agentloop.safety.recovery import ExponentialBackoffRecovery, NoopReflector
from agentloop.tools import ToolRegistry

if TYPE_CHECKING:
    from agentloop.engine.journal import Journal
    from agentloop.store import Store

if TYPE_CHECKING:
    from agentloop import events as ev
else:  # the event classes load when somebody first listens
    ev = lazy_module("agentloop.events")

__all__ = ["Dispatcher", "Outcome"]

_new = object.__new__

_NO_DECISIONS: Mapping[str, Decision] = {}
_NO_ANSWERS: Mapping[str, str] = {}


class Dispatcher(SafetyState):
    """Runs a turn's tool calls through the pipeline; the session's safety state too.

    A session's dispatcher, its safety state, its limits gate and its event channel always
    come together, one of each per session: one object for the collector to track, not three
    (``safety``, ``limits``, ``bus`` and ``observers`` are the dispatcher itself).
    """

    __slots__ = (
        "clock", "default_recovery", "gates", "journal", "registry", "store"
    )  # fmt: skip

    def __init__(self, own: dict[str, Any], session_id: str) -> None:
        """One session's dispatcher; ``own``: its agent's attributes (``vars(agent)``)."""
        config, clock, hooks, approver = (
            own["config"],
            own["clock"],
            own["_hooks"],
            own["_approver"],
        )
        fixed: _Fixed | None = own.get("_dispatching")
        if (
            fixed is None
            or fixed[0] is not config
            or fixed[1] is not clock
            or fixed[2] is not hooks
            or fixed[3] is not approver
        ):  # the agent's, made again if what it was made of changed (by identity)
            fixed = own["_dispatching"] = _fixed(config, clock, hooks, approver)
        _, _, _, _, self.gates, monotonic, self.default_recovery, draws = fixed
        SafetyState.__init__(
            self,
            config,
            own["_observers"],
            session_id,
            clock,
            breakers=own["breakers"],
            monotonic=monotonic,
            draws=draws,
        )  # (``config`` and ``monotonic``: the safety state's, the limits gate's)
        self.registry: ToolRegistry = own["registry"]
        self.journal: Journal | None = None
        self.store: Store | None = None
        """The session's store, where a child agent's runs are recorded too (SPEC 18)."""
        self.clock = clock

    @property
    def safety(self) -> SafetyState:
        """The session's safety state: this dispatcher itself."""
        return self

    @safety.setter
    def safety(self, state: SafetyState) -> None:
        if state is not self:  # (settable for ``PipelineServices``, which reads it)
            raise AttributeError("a dispatcher is its session's safety state; it has no other")

    @property
    def observers(self) -> EventBus:
        """The session's event channel: this dispatcher itself (``active``, ``emit``)."""
        return self

    @property
    def approver(self) -> Approver | None:
        """The agent's approver (answers ``Ask``)."""
        return self.gates.approver

    async def dispatch_turn(
        self,
        state: RunState,
        calls: Sequence[ToolCallPart],
        decisions: Mapping[str, Decision] = _NO_DECISIONS,
        answered: Mapping[str, str] = _NO_ANSWERS,
        quiet: Mapping[str, str] = _NO_ANSWERS,
    ) -> list[ToolResultPart | PendingCall | PausedChild]:
        """Every call's result (or ``PendingCall``), in the model's order.

        ``decisions``: a person's decisions by call id, for a paused turn's pending calls.
        ``answered``: soft texts by call id for calls that do not run (cut at the output limit).
        ``quiet``: soft texts by call id for the typed answer's ``final_result`` calls, which are
        the answer, not tools: no tool-call events.
        Every call ends in its ``ToolCallFinished`` or stays pending, whatever ends the turn: a
        cancel or a hard error finishes the calls it cut or never reached (``interrupted``).
        """
        if self.active:
            for call in [c for c in calls if c.id not in quiet] if quiet else calls:
                self.emit(ev.ToolCallRequested(state.run.id, state.turn_index, call))
        if len(calls) == 1:  # the common turn: no list comprehension to make one pipeline
            pipelines = [CallPipeline(self, state, calls[0], decisions.get(calls[0].id), self)]
        else:
            pipelines = [CallPipeline(self, state, c, decisions.get(c.id), self) for c in calls]
        try:
            lone = self._lone(state, pipelines, answered, quiet)
            if lone is not None:
                return [await lone.run()]
            return await self._dispatch(state, pipelines, answered, quiet)
        except BaseException:
            if self.active:
                for pipeline in pipelines:
                    if pipeline.call.id not in quiet:
                        pipeline.interrupted()
            raise

    def lone(
        self,
        state: RunState,
        calls: Sequence[ToolCallPart],
        answered: Mapping[str, str],
        quiet: Mapping[str, str],
    ) -> CallPipeline | None:
        """The turn's one call, admitted and ready to run, when nobody listens; else None.

        What ``dispatch_turn`` does before its one call runs, without its coroutine: with no
        listener it emits nothing and finishes nothing when an exception cuts the call, so the
        caller awaits ``run()`` itself and wraps its one answer (``[await lone.run()]``).
        """
        if len(calls) != 1 or answered or quiet or self.active:
            return None
        call = calls[0]
        if call.name not in state.offer.names:
            return None
        pipeline: CallPipeline = _new(CallPipeline)  # ``CallPipeline(self, state, call)``,
        pipeline.dispatcher = pipeline.safety = self  # written out: no ``__init__`` call
        pipeline.state, pipeline.call, pipeline.name = state, call, call.name
        pipeline.arguments, pipeline.attempt, pipeline.decision = call.arguments, 0, None
        pipeline.open = pipeline.ended = False
        self.admit_tools(1)
        for token in state.tokens:  # ``RunState.check_cancel``, written out
            if token._fired:
                raise Cancelled()
        return pipeline

    def _lone(
        self,
        state: RunState,
        pipelines: list[CallPipeline],
        answered: Mapping[str, str],
        quiet: Mapping[str, str],
    ) -> CallPipeline | None:
        """A turn's one call when it runs (admitted, the cancel checked), as ``_dispatch`` would.

        The common turn, one call to an offered tool, then skips ``_dispatch``'s bookkeeping.
        """
        if len(pipelines) != 1 or answered or quiet:
            return None
        pipeline = pipelines[0]
        if pipeline.name not in state.offer.names:
            return None
        self.admit_tools(1)
        state.check_cancel()
        return pipeline

    async def _dispatch(
        self,
        state: RunState,
        pipelines: list[CallPipeline],
        answered: Mapping[str, str],
        quiet: Mapping[str, str],
    ) -> list[ToolResultPart | PendingCall | PausedChild]:
        count = len(pipelines) - len(answered) - len(quiet)  # the calls that may run
        if count:
            self.admit_tools(count)
        results: list[ToolResultPart | PendingCall | PausedChild | None] = [None] * len(pipelines)
        runnable: list[int] = []
        offered = state.offer.names
        for index, pipeline in enumerate(pipelines):
            call = pipeline.call
            if call.id in quiet:
                results[index] = ToolResultPart(call.id, call.name, quiet[call.id], True)
            elif call.id in answered:
                results[index] = pipeline.answer(answered[call.id])
            elif pipeline.name in offered:
                runnable.append(index)
            else:
                results[index] = pipeline.unavailable()
        if self.config.parallel_tool_calls and len(runnable) > 1:
            await self._run_parallel(pipelines, runnable, results)
        else:
            for index in runnable:
                state.check_cancel()
                results[index] = await pipelines[index].run()
        return [
            r
            if r is not None
            else ToolResultPart(p.call.id, p.call.name, "dispatch produced no result", True)
            for r, p in zip(results, pipelines, strict=True)
        ]

    async def _run_parallel(
        self,
        pipelines: list[CallPipeline],
        runnable: list[int],
        results: list[ToolResultPart | PendingCall | PausedChild | None],
    ) -> None:
        semaphore = asyncio.Semaphore(min(self.config.max_concurrency, len(runnable)))
        failures: dict[int, AgentLoopError] = {}

        async def one(index: int) -> None:
            async with semaphore:
                try:
                    results[index] = await pipelines[index].run()
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


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            return _first_error(error)
        if not isinstance(error, asyncio.CancelledError):
            return error
    return group.exceptions[0]


_Fixed = tuple[
    RunConfig, Clock, tuple[Hook, ...], "Approver | None", Gates, Callable[[], float], bool, bool
]


def _fixed(config: RunConfig, clock: Clock, hooks: tuple[Hook, ...], approver: Any) -> _Fixed:
    """What every session's dispatcher of an agent shares, kept in the agent's attributes.

    Made again when the config, clock, hooks or approver it was made of are no longer the
    agent's (compared by identity: a config is frozen). None of it is a session's or a run's:
    the gates hold the hooks and the approver only.
    """
    monotonic: Callable[[], float] = (
        time.monotonic if type(clock).monotonic is Clock.monotonic else clock.monotonic
    )  # the system's function itself for the system's clock (no call of ours per reading:
    # the engine reads it twice a model call and twice a tool call)
    # the stock pair always fails at once; exact types, so a subclass's override still runs
    default_recovery = (
        type(config.reflector) is NoopReflector
        and type(config.recovery) is ExponentialBackoffRecovery
    )
    gates = Gates(hooks, approver, headless=config.headless)
    draws = BudgetGate._draws(config.budget)  # whether each session's limits need a gate
    return (config, clock, hooks, approver, gates, monotonic, default_recovery, draws)
