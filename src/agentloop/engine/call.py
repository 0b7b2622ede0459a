"""The per-call pipeline: one object per tool call, owning its attempts.

Per attempt, in order: ``ToolCallStarted`` → pre-tool hooks and the approver (a veto is soft,
never recovered) → loop pre-check (at the stop threshold the call is refused and the run ends)
→ tool breaker gate (open: soft, never recovered) → the tool (``agentloop.engine.invoke``) →
result →
post-tool hooks → breaker record → recovery decision (a retry re-runs this whole list).

A gate can leave the call **pending** (SPEC 17): the pipeline then answers a ``PendingCall`` and
nothing more happens to it in this turn. A call continued with a person's decision skips the
gates (they were asked) and recovery (its failure is its soft result): ``Deny`` and ``Answer``
are its result; ``Approve`` and ``Edit`` run it at most once, the journal marking it started
before it runs and its result once it returns (``LOST_TEXT`` when it started and never returned).

``finish`` is the one place a result is made, whatever decided it: built, recorded for loop
detection (every soft result counts, SPEC 6), announced with ``ToolCallFinished``. What each
outcome records is a table (``_NOT_RECORDED``, ``_UNAVAILABLE``). Only the engine ends runs: a
tool never can.

Every call ends in exactly one ``ToolCallFinished`` per ``ToolCallStarted`` (same ``attempt``),
or stays pending (SPEC 12): a call answered without an attempt (a name never offered, a call cut
at the output limit) gets the pair at once; an attempt an exception cut (a cancel, a hard error)
is finished by ``interrupted`` with ``INTERRUPTED_TEXT``, the result ``finalize`` records for it.

The pipeline reaches the dispatcher that runs it only through ``PipelineServices``, a protocol
naming what it uses, so this module sits beneath ``agentloop.engine.dispatch`` and never imports
it back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from types import CoroutineType
from typing import TYPE_CHECKING, Any, TypeAlias

from agentloop._util.lazy import lazy_module
from agentloop.engine.attempt import Attempt, PausedChild, PipelineServices
from agentloop.engine.gates import Asked
from agentloop.engine.invoke import Outcome, suggestion
from agentloop.engine.state import RunState
from agentloop.errors import ToolError, ToolRecoveryExhausted
from agentloop.messages import MediaPart, ToolCallPart, ToolResultPart
from agentloop.pausing import LOST_TEXT, Answer, Decision, Deny, Edit, PendingCall
from agentloop.safety.recovery import (
    MAX_RECOVERY_ATTEMPTS,
    Correction,
    RecoveryAction,
    Retry,
    ToolFailure,
)
from agentloop.tools import Tool, ToolContext, ToolRegistry, render_content
from agentloop.transcript import INTERRUPTED_TEXT

if TYPE_CHECKING:
    from agentloop.engine.attempt import _Attempted, _Ran
    from agentloop.engine.guards import SafetyState

if TYPE_CHECKING:
    from agentloop import events as ev
else:  # the event classes load when somebody first listens
    ev = lazy_module("agentloop.events")

__all__ = ["CallPipeline", "ContinueChild", "PausedChild", "PipelineServices", "pending_of"]

logger = logging.getLogger("agentloop")

_FINAL: frozenset[Outcome] = frozenset({"ok", "vetoed", "refused"})
"""Outcomes no recovery follows."""

_UNAVAILABLE: frozenset[Outcome] = frozenset({"missing", "unavailable"})
"""Results the loop detector records as calls to a tool that is not there."""

_NOT_RECORDED: frozenset[Outcome] = frozenset({"looping"})


_Answered: TypeAlias = "ToolResultPart | PendingCall | PausedChild"
"""A call's answer: its result, or it is pending (SPEC 17)."""


class ContinueChild:
    """The decision for a paused child agent's call: continue the child.

    The child's own decisions wait in ``RunState.children``.
    """

    __slots__ = ()


def pending_of(answers: Sequence[object]) -> tuple[PendingCall, ...]:
    """Every pending call among a dispatch's answers, a paused child's included, in order."""
    pending: list[PendingCall] = []
    for answer in answers:
        if isinstance(answer, PendingCall):
            pending.append(answer)
        elif isinstance(answer, PausedChild):
            pending.extend(answer.pending)
    return tuple(pending)


class CallPipeline(Attempt):
    """One tool call through the pipeline, with recovery."""

    __slots__ = (
        "arguments", "attempt", "call", "decision", "dispatcher", "ended", "name", "open",
        "safety", "state",
    )  # fmt: skip

    def __init__(
        self,
        dispatcher: PipelineServices,
        state: RunState,
        call: ToolCallPart,
        decision: Decision | None = None,
        safety: SafetyState | None = None,
    ) -> None:
        """``safety``: ``dispatcher.safety``, when the caller has it (no property read)."""
        self.dispatcher = dispatcher
        self.safety = dispatcher.safety if safety is None else safety
        self.state = state
        self.call = call
        self.name = call.name
        self.arguments: Mapping[str, Any] = call.arguments
        self.attempt = 0
        self.decision = decision
        self.open = False
        """A ``ToolCallStarted`` went out whose ``ToolCallFinished`` has not."""
        self.ended = False
        """A ``ToolCallFinished`` went out (the call has a result an observer saw)."""

    async def run(self) -> ToolResultPart | PendingCall | PausedChild:
        """The result the model reads, after any retries recovery asks for.

        Or the call is pending: a person or another service answers it (SPEC 17). An attempt an
        exception cuts (a cancel, a hard error) still ends in its ``ToolCallFinished``. A call
        no gate looks at (no pre-tool hook, a tool declared neither ``requires_approval`` nor
        ``external``) goes straight from the loop pre-check to the tool.
        """
        try:
            if self.decision is not None:
                return await self._decided(self.decision)
            while True:  # each attempt recovery asks for
                ctx = self._context()
                self.open = True  # ``_started``: its event only while somebody listens
                if self.dispatcher.active:
                    self._started()
                tool = self._looked_up()
                gated = (  # a tool that never waits: its result without a coroutine
                    self._gated(ctx, tool if _declared(tool) else None)
                    if _declared(tool) or self.dispatcher.gates.pre_hooks
                    else self._ungated(ctx, tool)
                )
                attempted: _Ran | PendingCall = (
                    await gated if type(gated) is CoroutineType else gated  # type: ignore[assignment]
                )
                if not isinstance(attempted, tuple):
                    return attempted
                result, outcome = attempted
                if outcome in _FINAL or not await self._retrying(result):
                    return result
        except BaseException:
            self._cut()
            raise

    def now(self) -> _Answered | Coroutine[Any, Any, _Answered]:
        """``run``, without its coroutine for the common call; else the coroutine to await.

        A call no gate looks at, nobody listening, whose first attempt ends without waiting
        and needs no recovery ends here; any other goes on in ``run`` (or ``_went_on``).
        """
        d = self.dispatcher
        if self.decision is not None or d.active or d.gates.pre_hooks:
            return self.run()
        registry = self.state.registry  # ``_looked_up``, written out
        if registry is None:
            registry = d.registry
        tool = (
            registry._tools.get(self.name)  # ``ToolRegistry.get``'s own read
            if type(registry) is ToolRegistry
            else registry.get(self.name)
        )
        if tool is not None and (tool.requires_approval or tool.external):  # ``_declared``
            return self.run()
        safety, state = self.safety, self.state
        run = state.run
        ctx: ToolContext[Any] = object.__new__(ToolContext)  # ``_context``, written out
        ctx.deps, ctx.agent, ctx.run_id = state.deps, run.last_agent, run.id
        ctx.turn, ctx.call_id, ctx.tool_name = state.turn_index, self.call.id, self.name
        ctx.media, ctx._cancel, ctx.session_id = (), None, d.session_id
        ctx._scratch, ctx._link = None, (state, d)
        try:
            self.open = True  # ``run``'s attempt: an exception cuts it (``_cut``)
            if safety.detection_on and safety._loops is not None:  # ``_ungated``, written out
                self._refuse_if_looping()  # (no detector yet: nothing at the stop line)
            attempted = self._attempt(ctx, tool)
        except BaseException:
            self._cut()
            raise
        if type(attempted) is tuple and attempted[1] in _FINAL:
            return attempted[0]
        if type(attempted) is PausedChild:
            return attempted
        return self._went_on(attempted)

    async def _went_on(self, attempted: _Attempted) -> _Answered:
        """``now``'s attempt that waits or fails: awaited, recovered, retried as ``run`` does."""
        try:
            ran: _Ran = await attempted if type(attempted) is CoroutineType else attempted  # type: ignore[assignment]
            if not isinstance(ran, tuple):
                return ran
            result, outcome = ran
            if outcome in _FINAL or not await self._retrying(result):
                return result
        except BaseException:
            self._cut()
            raise
        return await self.run()  # the next attempt, as ``run``'s loop takes it

    async def _retrying(self, result: ToolResultPart) -> bool:
        """Whether recovery retries a failed attempt (after its delay, with its correction)."""
        action, correction = await self._decide(result)
        if not isinstance(action, Retry):
            return False
        self.attempt += 1
        if self.attempt > MAX_RECOVERY_ATTEMPTS:
            raise ToolRecoveryExhausted(self.call.name, self.attempt)
        if action.delay > 0:
            await self.dispatcher.clock.sleep(action.delay)
        self._apply(correction)
        return True

    def _cut(self) -> None:
        """An exception cut the call: its open attempt ends (``interrupted``)."""
        if self.open:
            self.interrupted()

    def unavailable(self) -> ToolResultPart:
        """A call to a name the model was never offered: soft, counted, nothing run."""
        self._started()
        self._refuse_if_looping()
        plan = self.state.plan
        loaded = None if plan is None else plan.load_on_call(self.name)
        if loaded is not None:  # a deferred tool: loaded for the next step (SPEC 22)
            return self.finish(loaded, "unavailable")[0]
        text = f"tool '{self.name}' is not available"
        hint = suggestion(self.dispatcher.config, self.name, self.state.offer.names)
        if hint:
            text += f". Did you mean '{hint}'?"
        return self.finish(text, "unavailable")[0]

    def answer(self, text: str) -> ToolResultPart:
        """A call the engine answers without running it (cut at the output limit): soft."""
        self._started()
        result = ToolResultPart(self.call.id, self.call.name, text, True)
        self._finished(result, 0.0)
        return result

    def interrupted(self) -> None:
        """End the call's open attempt, or a call never attempted, with ``INTERRUPTED_TEXT``.

        For a call an exception cut (a cancel, a hard error in its turn): the same soft result
        ``finalize`` records for it (``agentloop.transcript.close_interrupted``). A call that
        already ended gets nothing more.
        """
        if self.ended and not self.open:
            return
        if not self.open:
            self._started()
        call = self.call
        self._finished(ToolResultPart(call.id, call.name, INTERRUPTED_TEXT, True), 0.0)

    def _started(self) -> None:
        """Announce an attempt (``ToolCallStarted``)."""
        d, state = self.dispatcher, self.state
        self.open = True
        if d.active:
            d.emit(ev.ToolCallStarted(state.run.id, state.turn_index, self.call, self.attempt))

    def _finished(self, result: ToolResultPart, duration: float) -> None:
        """Announce the attempt's result (``ToolCallFinished``)."""
        d, state = self.dispatcher, self.state
        self.open = False
        self.ended = True
        if d.active:
            d.emit(
                ev.ToolCallFinished(
                    state.run.id, state.turn_index, self.call, result, self.attempt, duration
                )
            )

    def finish(
        self,
        text: str,
        outcome: Outcome,
        duration: float = 0.0,
        media: tuple[MediaPart, ...] = (),
    ) -> tuple[ToolResultPart, Outcome]:
        """Make the attempt's result: build it, record it for loop detection, announce it."""
        call, state, d = self.call, self.state, self.dispatcher
        result = (  # positional when there is no media: a keyword costs the call a dict
            ToolResultPart(call.id, call.name, text, outcome != "ok", media=media)
            if media
            else ToolResultPart(call.id, call.name, text, outcome != "ok")
        )
        if duration:
            turn = state.run.turns[-1]
            if turn.durations is None:
                turn.durations = {}
            turn.durations[call.id] = duration
        safety = self.safety
        if safety.detection_on and outcome not in _NOT_RECORDED:  # a raising detector: off
            try:
                warning = safety.loop_record(
                    self.name, self.arguments, text, result.is_error, outcome not in _UNAVAILABLE
                )
            except Exception as exc:
                safety.poisoned("the loop detector", exc)
            else:
                if warning is not None:
                    safety.warned(state.run, warning)
        self.open, self.ended = False, True  # ``_finished``: its event only when listened to
        if d.active:
            self._finished(result, duration)
        return result, outcome

    async def _decided(self, decision: Decision | ContinueChild) -> ToolResultPart | PausedChild:
        """A call a person decided: its result, the call run at most once (SPEC 17)."""
        self._started()
        if isinstance(decision, ContinueChild):  # the child records and journals its own
            continued = await self._run_tool(self._context())
            return continued if isinstance(continued, PausedChild) else continued[0]
        if isinstance(decision, Deny):
            return self.finish(decision.text, "vetoed")[0]
        if isinstance(decision, Answer):
            text, media = _answer(decision.content)
            return self.finish(text, "ok", media=media)[0]
        if isinstance(decision, Edit):
            self.arguments = dict(decision.arguments)
        return await self._at_most_once()

    async def _at_most_once(self) -> ToolResultPart | PausedChild:
        """Run an approved call: marked started before, its result kept after (the journal)."""
        journal, call = self.dispatcher.journal, self.call
        started, done = f"decided/{call.id}/started", f"decided/{call.id}/result"
        if journal is not None:
            entry = journal.entries.get(done)
            if entry is not None:
                return self.finish(entry["text"], entry["outcome"])[0]
            if started in journal.entries:
                return self.finish(LOST_TEXT, "tool_error")[0]
            journal.record(started, {"arguments": dict(self.arguments)})
        ran = await self._run_tool(self._context())
        if isinstance(ran, PausedChild):
            return ran
        result, outcome = ran
        if journal is not None:
            journal.record(done, {"text": result.content, "outcome": outcome})
        return result

    def _context(self) -> ToolContext:
        """The attempt's ``ToolContext``, its slots set without ``__init__``'s keywords."""
        d, state = self.dispatcher, self.state
        run = state.run
        ctx: ToolContext[Any] = object.__new__(ToolContext)
        ctx.deps = state.deps
        ctx.agent = run.last_agent
        ctx.run_id = run.id
        ctx.turn = state.turn_index
        ctx.call_id = self.call.id
        ctx.tool_name = self.name
        ctx.media = ()
        ctx._cancel = None  # made at its first read (``ToolContext.cancel``)
        ctx.session_id = d.session_id
        ctx._scratch = None
        ctx._link = (state, d)
        return ctx

    async def _gated(
        self, ctx: ToolContext, tool: Tool | None
    ) -> tuple[ToolResultPart, Outcome] | PendingCall | PausedChild:
        """An attempt past the gates: pre-tool hooks, the approver, a tool's declarations."""
        d, state, call = self.dispatcher, self.state, self.call
        veto = await d.gates.veto(call, ctx, tool)
        state.check_cancel()  # cancelled while a blocking approver was open: nothing runs
        if type(veto) is Asked:
            return PendingCall(call, veto.kind, veto.message)
        self._refuse_if_looping()
        if veto is not None:
            return self.finish(veto, "vetoed")  # type: ignore[arg-type]
        return await self._run_tool(ctx)

    async def _decide(
        self, result: ToolResultPart
    ) -> tuple[RecoveryAction | None, Correction | None]:
        """The recovery action for a failed attempt (None when a reflector or strategy raised)."""
        d = self.dispatcher
        if d.default_recovery:
            return None, None
        registry = d.registry if self.state.registry is None else self.state.registry
        tool = registry.get(self.name)
        failure = ToolFailure(
            tool=self.name,
            arguments=self.arguments,
            error_text=result.content,
            schema=tool.parameters if tool else None,
            attempt=self.attempt,
            max_attempts=MAX_RECOVERY_ATTEMPTS,
            validate=_validator(tool),
        )
        try:
            analysis = await d.config.reflector.analyze(failure)
            action = d.config.recovery.decide(analysis, self.attempt, MAX_RECOVERY_ATTEMPTS)
        except Exception:
            logger.warning(
                "recovery for tool '%s' raised; treated as Fail", self.name, exc_info=True
            )
            return None, None
        return action, analysis.correction

    def _apply(self, correction: Correction | None) -> None:
        """Apply a correction to the retry's input (never to the recorded history)."""
        if correction is None:
            return
        if correction.kind == "input_fix" and correction.arguments is not None:
            self.arguments = dict(correction.arguments)
        elif correction.kind == "tool_change" and correction.tool:
            self.name = correction.tool


def _declared(tool: Tool | None) -> bool:
    """Whether the called tool is declared ``requires_approval`` or ``external`` (a gate's)."""
    return tool is not None and (tool.requires_approval or tool.external)


def _answer(content: Any) -> tuple[str, tuple[MediaPart, ...]]:
    """An ``Answer``'s content as the result text (and media), as a tool's output is made."""
    if isinstance(content, str):
        return content, ()
    from agentloop.tools import split_output

    try:
        return split_output(content)
    except Exception:  # an answer the renderer cannot take is still an answer: its text
        return render_content(str(content)), ()


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
