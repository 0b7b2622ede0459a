"""One run of a session (``agentloop.engine.conversation``), as a short sequence of named steps.

A run: start (tools listed, the record begun, ``RunStarted``, input guardrails) → per turn
(cancel checkpoint → tool sources refreshed → the context guard compacts if needed → the limits
gate → the model step, beside a parallel input guardrail → record → the answer, past the output
guardrails, or dispatch) until an answer → finalize. Every exit goes through ``finalize``, which
records ``stop_reason`` and commits history three ways (success: all; cannot-fit family:
nothing; anything else: the completed turns), and a fourth for a run that paused on pending
calls (the completed turns; the paused turn is kept on the run, ``agentloop.engine.pause``). A
continued paused run first completes its paused turn (``_resume_paused``), then goes on.
Guardrails: ``agentloop.engine.guarding``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping, Sequence
from types import CoroutineType, MappingProxyType
from typing import TYPE_CHECKING, Any

from agentloop import events as ev
from agentloop._util.lazy import lazy_module
from agentloop.engine import ending, remembering
from agentloop.engine.call import pending_of
from agentloop.engine.conversation import Conversation
from agentloop.engine.frames import internal_error, released
from agentloop.engine.model_step import ModelStep
from agentloop.engine.output import (
    CUT_CALL_TEXT,
    cut_calls,
)
from agentloop.engine.provider_tools import (
    PAUSE_TURN,
    answer_text,
    continued,
)
from agentloop.engine.starting import run_instructions
from agentloop.engine.state import Paused, RunOptions, RunState
from agentloop.engine.turn import reports
from agentloop.engine.typed_turn import typed_turn
from agentloop.errors import (
    AgentLoopError,
    Cancelled,
    CompactionStalled,
    ContextExceeded,
    ContextLengthExceeded,
)
from agentloop.hooks import Hook, overrides
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import ModelRequest, ModelResponse
from agentloop.run import TRUNCATION_REASONS, Run, Turn

handoffs = lazy_module("agentloop.engine.handoffs")  # loaded by a run that hands off
guarding_of = lazy_module("agentloop.engine.guarding")  # loaded by a run with guardrails

if TYPE_CHECKING:  # annotations (the guardrails' module loads only for an agent with them)
    from agentloop.cancel import CancelToken
    from agentloop.engine.call import PausedChild
    from agentloop.engine.guarding import RunGuard
    from agentloop.pausing import PendingCall

__all__ = ["CUT_CALL_TEXT", "RunLoop"]

logger = logging.getLogger("agentloop")

_CANNOT_FIT = (ContextExceeded, CompactionStalled, ContextLengthExceeded)
_NONE: Mapping[str, str] = MappingProxyType({})


class RunLoop(ModelStep):
    """The steps of one run of ``session`` over ``state`` (``agent``: its definition)."""

    __slots__ = (
        "agent", "clock", "config", "finalizing", "guarding", "output", "own", "quiet",
        "session", "started", "state", "task",
    )  # fmt: skip

    def __init__(self, session: Conversation[Any], state: RunState | None = None) -> None:
        """The steps of a run over ``state``; None: ``Session.run``'s, begun by ``drive``."""
        self.session = session
        self.agent = session.agent
        self.own = own = session._own  # the agent's attributes, read at C speed (no hook)
        self.config, self.clock, self.output = own["config"], own["clock"], own["output"]
        """The agent's, read once a run: each read of an ``Agent`` pays its ``__getattr__``
        (SPEC 21), and ``_model_step`` reads them at every call. The run's own agent: a handoff
        changes the one that rules (``_ruling``), never these."""
        self.finalizing = False
        self.latency: float | None = None
        self.started = 0.0
        """When the common model call was sent (``clock.monotonic``), for its latency."""
        self.task: asyncio.Task[Any] | None = None
        if state is not None:
            self._bind(state)

    def _bind(self, state: RunState) -> RunState:
        """The run's state, and what the loop reads of it once (its events, its guardrails)."""
        self.state = state
        self.quiet = not reports(state.client)  # its requests' events: for a listener only
        self.guarding: RunGuard | None = None  # nothing to pay for a run without guardrails
        if self.own["_guardrails"] is not None or state.run.last_agent is not None:
            self.guarding = guarding_of.run_guard(self.session, state, self._ruling())
        return state

    def _opening(
        self,
        input: Any,
        deps: Any,
        cancel: CancelToken | None,
        toolsets: object,
        model_settings: object,
        usage_limits: object,
    ) -> RunState:
        """``Session.run``'s start, as its awaited coroutine's first step (``Session.run``).

        Its arguments checked and the run begun here, so a mistake raises at the ``await``,
        as it did when ``Session.run`` was a coroutine of its own.
        """
        options = RunOptions.checked(model_settings, usage_limits, toolsets)
        cancels = () if cancel is None else (cancel,)
        session = self.session
        return self._bind(session._begin(input, deps, cancels, None, options=options))

    def _watching(self, state: RunState) -> RunState:
        """The run's task, and ``state``'s tokens watched by the loop (``__call__``)."""
        loop = asyncio.get_running_loop()  # read once, for the task and every token
        self.task = asyncio.current_task(loop)
        self.session._watcher = self  # a session signal made while it runs is watched at once
        state.watch(self, loop)  # the loop is the callback: no bound method kept (handle: its id)
        return state

    async def drive(self, *start: Any) -> Run[Any]:
        """Run to the end in the caller's task, no inner coroutine (``start``: ``Session.run``'s).

        A token's callback cancels that task while the steps run; ``_caught`` takes it back.
        """
        state, start = self._watching(self._opening(*start) if start else self.state), ()
        error = let_go = None
        reply: ModelResponse | None  # (each set to None before the end: see below)
        response: ModelResponse | None
        turn: Turn | None
        answer: bool | Awaitable[bool | None] | None
        try:
            if self._awaits_start():
                await self._start()  # a continued paused run completes its paused turn there
            else:
                self._opened()
            while True:  # the turns until an answer; ``Paused`` when calls are left pending
                request = self._plain_request()
                if request is None:  # it awaits something first, or it is not the common call
                    response = await self._model_call()
                else:
                    try:
                        reply = await state.client.complete(request)
                    except Exception as exc:
                        self._failed(exc, self.started)  # raised, or a rejection salvaged
                        continue
                    response = self._responded(request, reply, self.started)
                if response is None:
                    continue
                turn = self._record(response)
                answer = self._answer(turn, response)
                done = answer if type(answer) is bool else await answer  # a dispatch awaits
                if self._turn_closed(turn, done):
                    break
        except BaseException as exc:
            error, let_go = self._caught(exc)
        request = reply = response = turn = answer = None  # what is raised keeps this frame
        if self._awaits_end() or let_go is not None:
            await self.finalize(error)
        else:  # nothing to await at the end: its steps in a row (``finalize`` without awaits)
            self._finalized(error)
        stop = state.run.stop_reason
        if stop is None:
            return state.run
        del self, state, error  # the error's traceback keeps this frame: nothing of the run in it
        try:  # an interrupt or a cancel not the run's own goes on; else the error, released
            raise let_go if let_go is not None else released(stop)  # (engine.frames)
        finally:
            del stop, let_go

    def _caught(self, exc: BaseException) -> tuple[AgentLoopError | None, BaseException | None]:
        """What ended the run's steps, and what goes on to the caller after the run's end.

        A pause (SPEC 17) ends it unfailed; the run's own cancellation of its task is taken
        back (``uncancel``); a cancellation not its own, or an interrupt (``KeyboardInterrupt``,
        ``SystemExit``), ends it ``Cancelled`` and is raised again.
        """
        if isinstance(exc, Paused):
            return None, None
        if isinstance(exc, AgentLoopError):
            return exc, None
        if isinstance(exc, asyncio.CancelledError) and self.state.cancelled:
            return _taken_back(), None
        if isinstance(exc, Exception):  # (a ``CancelledError`` is not one)
            return internal_error(exc), None
        return Cancelled(), exc

    def _finalized(self, error: AgentLoopError | None) -> None:
        """``finalize`` for a run whose end awaits nothing (``_awaits_end``)."""
        self.finalizing = True
        paused = ending.committed(self, error)
        ending.closed(self, error)
        ending.told(self, paused)

    def _ruling(self) -> Any:
        """The agent that rules the run now: a handoff's receiver (SPEC 26), else its own."""
        name = self.state.run.last_agent
        return self.agent if name is None else handoffs.active_agent(self.agent, name)

    def __call__(self) -> None:
        """A watched token fired: interrupt what the run awaits once, unless it is finalizing.

        Once: a second cancel of the caller's task would outlive the run (it takes one back).
        The last token is the one tools read (``ctx.cancel``): with a caller's token it is the
        run's own, fired here, so a tool sees the session's cancel as well as the caller's.
        """
        task = self.task
        if self.finalizing or task is None:
            return
        self.task = None
        tokens = self.state.tokens
        if len(tokens) > 1:
            tokens[-1].cancel()
        task.cancel()

    def _awaits_start(self) -> bool:
        """Whether the run's start awaits anything: tool sources, hooks, instructions, checks."""
        own, state = self.own, self.state
        return bool(
            own["_toolsets"].toolsets
            or own["_hooks"]
            or own["_prompt"] is not None
            or (own["memory"] if "memory" in own else type(self.agent).memory) is not None
            or state.plan is not None
            or state.run.last_agent is not None
            or self.guarding is not None
            or state.resuming is not None
        )

    async def _start(self) -> None:
        agent, session, state = self.agent, self.session, self.state
        state.check_cancel()
        if agent._toolsets.toolsets:  # MCP servers and other tool sources
            await agent._refresh_tools(state, starting=True)
        self._begun()
        for hook in agent._hooks:
            if overrides(hook, Hook, "on_run_start"):
                await hook.on_run_start(state.run)
        await run_instructions(session, state)
        self._measured()
        if state.resuming is not None:  # a continued paused run: its paused turn first
            from agentloop.engine.pause import complete_paused_turn

            await complete_paused_turn(session, state)
        elif self.guarding is not None:  # (a continued run was checked)
            await self.guarding.start()

    def _awaits_end(self) -> bool:
        """Whether the run's end awaits anything: a guardrail check, memory writes, hooks."""
        own = self.own
        memory = own["memory"] if "memory" in own else type(self.agent).memory
        return bool(self.guarding is not None or memory is not None or own["_hooks"])

    def _opened(self) -> None:
        """``_start`` for a run whose start awaits nothing (``_awaits_start``)."""
        self.state.check_cancel()
        self._begun()
        self._measured()

    def _begun(self) -> None:
        """The record begun, the limits zeroed, ``RunStarted``."""
        session, run = self.session, self.state.run
        if session._recorder is not None:
            session._recorder.begin(run)
        session.safety.limits.begin(self.state.budget)
        if session._bus.active:
            session._bus.emit(ev.RunStarted(run.id, 0, run))

    def _measured(self) -> None:
        """The starting transcript measured; an append-only base, a handoff's view (26, 28)."""
        state = self.state
        state.guard.start(state.transcript, state.offer.specs, state.measured)
        if state.appendonly is not None:  # SPEC 28: the conversation's base, built once
            state.appendonly.open(self.session, state)
        if state.shown is not None:  # a paused filtered handoff's view is what is sent (26)
            handoffs.measure(state)

    def _offering(self) -> bool:
        """Whether this call has an offer step (a run with none of them pays four reads)."""
        state = self.state
        return bool(
            self.own["_toolsets"].toolsets
            or state.plan is not None
            or state.appendonly is not None
            or state.run.last_agent is not None  # a receiver's own tool sources (SPEC 26)
        )

    async def _offer(self) -> None:
        """Before each model call: the tools it offers, and what changed since the last call.

        Tool sources are refreshed (an MCP list change), the toolsets' plan picks this call's
        tools (SPEC 22); on an append-only conversation each difference is a system entry (28).
        """
        agent, state = self._ruling(), self.state  # a handoff's receiver: its tool sources (26)
        if agent._toolsets.toolsets:
            await agent._refresh_tools(state, starting=False)
        if state.plan is not None:  # the tools this call offers (SPEC 22)
            await state.plan.offer(state)
        if state.appendonly is not None:  # what changed since the last call, at the end
            state.appendonly.record(state)

    def _plain_request(self) -> ModelRequest | None:
        """A turn's checkpoints, then the common model call's request (None: ``_model_call``).

        The common call (nothing to offer, the context ready, no guardrails, not streamed) is
        awaited by ``drive`` itself: one coroutine fewer between the caller and the provider.
        """
        state = self.state
        state.check_cancel()
        self.session.safety.limits.before_request(state.run, state.turn_index)
        if (
            self.guarding is not None
            or self.config.stream
            or state.stream
            or self.own["_toolsets"].toolsets  # ``_offering``, written out (a call a turn)
            or state.plan is not None
            or state.appendonly is not None
            or state.run.last_agent is not None
            or not state.guard.ready()
        ):
            return None  # (``_model_call``)
        request = self._request()
        self.started = self.session._dispatcher.monotonic()
        if self.session._bus.active:  # a listener told ``TurnStarted`` may have cancelled
            state.check_cancel()
        return request

    def _model_call(self) -> Awaitable[ModelResponse | None]:
        """Any other model call, to await: a guardrail's race, a stream, or its step prepared.

        Not a coroutine itself: a streamed or guarded call is as deep as the common one.
        """
        if self._offering() or not self.state.guard.ready():
            return self._prepared_call()
        if self.guarding is not None:  # the reply waits for an input check's verdict
            return self.guarding.race(self._model_step())
        return self._model_step()

    async def _prepared_call(self) -> ModelResponse | None:
        """The offer step and compaction, then the model call."""
        await self._prepared()
        if self.guarding is not None:
            return await self.guarding.race(self._model_step())
        return await self._model_step()

    async def _prepared(self) -> None:
        """Before a model call: the offer step, then compaction when the context needs it."""
        state = self.state
        if self._offering():
            await self._offer()
        if not state.guard.ready():
            await state.guard.before_call(state, self._commit_compacted)

    def _turn_closed(self, turn: Turn, done: bool | None) -> bool:
        """The turn recorded as done; true when the run has its answer."""
        session, state, guarding = self.session, self.state, self.guarding
        if guarding is not None:
            guarding.release()
        handing = state.handoff is not None
        session._turn_done(state, turn)
        if handing:  # the receiver's output guardrails rule from the next turn (SPEC 26)
            self.guarding = guarding_of.run_guard(session, state, self._ruling())
        if done:
            return True
        state.turn_index += 1
        return False

    def _answer(self, turn: Turn, response: ModelResponse) -> bool | Awaitable[bool | None]:
        """The reply's step; true when the run has its answer (a provider's pause: ask again).

        An untyped reply: its calls dispatched, or its text is the output, past the output
        guardrails (a rejection is soft: the model reads it and answers again). What awaits
        comes back to await (a dispatch, a typed turn, a guardrail): an answer that awaits
        nothing is decided without a coroutine.
        """
        if response.stop_reason == PAUSE_TURN and continued(response):  # SPEC 24
            return False
        if self.output is not None:
            return typed_turn(self, turn, response)
        calls = turn.tool_calls  # the reply's, as ``_record`` kept them (one property read fewer)
        if calls:
            cut = _NONE if response.stop_reason not in TRUNCATION_REASONS else cut_calls(response)
            return self._dispatch(turn, calls, answered=cut)  # None: not done
        text = turn.text  # the reply's, as ``_record`` kept it
        turns = self.state.run.turns
        if len(turns) > 1 and turns[-2].stop_reason == PAUSE_TURN:  # one answer (SPEC 24)
            text = answer_text(turns, text)
        safety = self.session.safety
        if safety.detection_on:  # ``converge``: a raising detector switches detection off
            try:
                status = safety.convergence.record(text)
            except Exception as exc:
                safety.poisoned("the convergence detector", exc)
                status = None
            if status is not None:
                stop = safety.converged(self.state.run, status)
                if stop is not None:
                    raise stop
        if self.guarding is not None and self.guarding.guardrails.output:
            return self._guarded_answer(turn, response, text)
        self.state.run.output = text
        return True

    async def _guarded_answer(self, turn: Turn, response: ModelResponse, text: str) -> bool:
        """An untyped answer past the output guardrails: the output, or a soft rejection."""
        rejected = await self._guard_output(turn, response, text)
        if rejected is not None:
            self.state.append(Message.user(rejected))
            return False
        self.state.run.output = text
        return True

    async def _guard_output(self, turn: Turn, response: ModelResponse, value: Any) -> str | None:
        """The output guardrails on an answer: None to accept it, else the soft rejection."""
        guarding = self.guarding
        if guarding is None or not guarding.guardrails.output:
            return None
        return await guarding.check_output(turn, response, value)

    async def _dispatch(
        self,
        turn: Turn,
        calls: Sequence[ToolCallPart],
        *,
        answered: Mapping[str, str] = _NONE,
        finals: Mapping[str, str] = _NONE,
    ) -> None:
        """Run the turn's tool calls; a call in ``answered`` or ``finals`` (by id) gets that text.

        ``finals``: the typed answer's ``final_result`` calls, answered without tool-call events.
        """
        dispatcher, state, guarding = self.session._dispatcher, self.state, self.guarding
        if guarding is not None:
            guarding.release()  # not the answer: what the reply streamed goes out now
        lone = dispatcher.lone(state, calls, answered, finals)  # the common turn: one call
        if lone is not None:
            ran = lone.now()  # a tool that never waits: its answer without a coroutine
            answers: list[ToolResultPart | PendingCall | PausedChild] = [
                await ran if type(ran) is CoroutineType else ran  # type: ignore[list-item]
            ]
        else:
            answers = await dispatcher.dispatch_turn(state, calls, answered=answered, quiet=finals)
        for answer in answers:  # (the exact type first: no call)
            if type(answer) is not ToolResultPart and not isinstance(answer, ToolResultPart):
                state.paused = pending_of(answers)  # a call left pending (SPEC 17)
                turn.tool_results = [r for r in answers if isinstance(r, ToolResultPart)]
                raise Paused
        results: list[ToolResultPart] = answers  # type: ignore[assignment]  # all results
        if guarding is not None and guarding.guardrails.screens:
            await guarding.screen(calls, results, skip=answered.keys() | finals.keys())
        turn.tool_results = results
        state.append(Message("tool", tuple(results)))  # Message.tool_results, one call fewer

    def _commit_compacted(self, messages: list[Message]) -> None:
        """Compaction is a commit point: its result becomes the history."""
        session, state = self.session, self.state
        if session._recorder is not None:
            session._recorder.compacted(state.run, messages, len(state.audit))
        session._history = list(messages)
        state.replace(messages)

    async def finalize(self, error: AgentLoopError | None) -> None:
        """Record how the run ended, commit its history, tell hooks and observers."""
        self.finalizing = True
        if self.guarding is not None:  # a pending check stops: nothing it held goes out
            await self.guarding.close()
        paused = ending.committed(self, error)
        if self.agent.memory is not None:  # the committed turns' memory writes, applied
            error = await remembering.finish(self.session, self.state, error, bool(paused))
        ending.closed(self, error)
        if self.agent._hooks:
            await ending.run_end_hooks(self)
        ending.told(self, paused)


def _taken_back() -> Cancelled:
    """The run's own cancellation of its task, taken back (``uncancel``): it ends ``Cancelled``."""
    current = asyncio.current_task()
    if current is not None:
        current.uncancel()
    return Cancelled()
