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
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from agentloop import events as ev
from agentloop._util.lazy import lazy_module
from agentloop.engine import compaction, ending, remembering
from agentloop.engine.calls_step import CallStep
from agentloop.engine.conversation import Conversation
from agentloop.engine.frames import internal_error, released
from agentloop.engine.output import CUT_CALL_TEXT
from agentloop.engine.provider_tools import (
    PAUSE_TURN,
    answer_text,
    continued,
)
from agentloop.engine.starting import run_instructions
from agentloop.engine.state import Paused, RunOptions
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
from agentloop.messages import Message
from agentloop.model import ModelResponse
from agentloop.run import Run, Turn

handoffs = lazy_module("agentloop.engine.handoffs")  # loaded by a run that hands off
guarding_of = lazy_module("agentloop.engine.guarding")  # loaded by a run with guardrails

if TYPE_CHECKING:  # annotations (the guardrails' module loads only for an agent with them)
    from agentloop.cancel import CancelToken
    from agentloop.engine.guarding import RunGuard

__all__ = ["CUT_CALL_TEXT", "RunLoop"]

logger = logging.getLogger("agentloop")

_CANNOT_FIT = (ContextExceeded, CompactionStalled, ContextLengthExceeded)


class RunLoop(CallStep):
    """The steps of one run of ``session`` (``agent``: its definition), on the run's state.

    The loop is the run's ``RunState`` (``Conversation._new_state`` makes each state a loop,
    ``started_state`` fills it): one object a run holds across its model calls, not two.
    """

    __slots__ = (
        "agent", "clock", "finalizing", "guarding", "latency", "output", "own",
        "quiet", "started", "task",
    )  # fmt: skip

    def __init__(self, session: Conversation[Any]) -> None:  # (not ``RunState``'s: no fields)
        """A run's loop on ``session``, its state's fields unset until ``started_state``."""
        self.session = session
        self.agent = session.agent
        self.own = own = session._own  # the agent's attributes, read at C speed (no hook)
        self.config, self.clock, self.output = own["config"], own["clock"], own["output"]
        """The agent's, read once a run: each read of an ``Agent`` pays its ``__getattr__``
        (SPEC 21), and ``_model_step`` reads them at every call. The run's own agent: a handoff
        changes the one that rules (``_ruling``), never these."""
        self.finalizing = False
        self.latency = None
        self.started = 0.0
        """When the common model call was sent (``clock.monotonic``), for its latency."""
        self.task: asyncio.Task[Any] | None = None

    @property
    def state(self) -> RunLoop:
        """The run's state: the loop itself (no slot: a loop holding itself is a cycle)."""
        return self

    def _bind(self) -> RunLoop:
        """What the loop reads of its state once, begun (its events, its guardrails)."""
        self.quiet = not reports(self.client)  # its requests' events: for a listener only
        self.guarding: RunGuard | None = None  # nothing to pay for a run without guardrails
        if self.own["_guardrails"] is not None or self.run.last_agent is not None:
            self.guarding = guarding_of.run_guard(self.session, self, self._ruling())
        return self

    def _opening(
        self,
        input: Any,
        deps: Any,
        cancel: CancelToken | None,
        toolsets: object,
        model_settings: object,
        usage_limits: object,
    ) -> None:
        """``Session.run``'s start, as its awaited coroutine's first step (``Session.run``).

        Its arguments checked and the run begun here, on this loop, so a mistake raises at
        the ``await``, as it did when ``Session.run`` was a coroutine of its own.
        """
        options = RunOptions.checked(model_settings, usage_limits, toolsets)
        cancels = () if cancel is None else (cancel,)
        self.session._begin(input, deps, cancels, None, options=options, into=self)
        self._bind()

    def _watching(self, start: tuple[Any, ...]) -> tuple[()]:
        """The run begun (``start``: ``Session.run``'s), its task, its tokens watched.

        Without ``start``, ``Session._drive`` began it. The loop is the tokens' callback.
        """
        if start:
            self._opening(*start)
        loop = asyncio.get_running_loop()  # read once, for the task and every token
        self.task = asyncio.current_task(loop)
        self.session._watcher = self  # a session signal made while it runs is watched at once
        self.watch(self, loop)  # the loop is the callback: no bound method kept (handle: its id)
        return ()

    async def drive(self, *start: Any) -> Run[Any]:
        """Run to the end in the caller's task, no inner coroutine (``start``: ``Session.run``'s).

        A token's callback cancels that task while the steps run; ``_caught`` takes it back.
        """
        start = self._watching(start)  # (its arguments let go: this frame keeps none)
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
                        reply = await self.client.complete(request)
                    except Exception as exc:
                        self._failed(exc, self.started)  # raised, or a rejection salvaged
                        continue
                    response = self._responded(request, reply, self.started)
                if response is None:
                    continue
                turn = self._record(response)
                answer = self._answer(turn, response)
                done = answer if type(answer) is bool else await answer  # a dispatch awaits
                reply = response = answer = None  # not held across the next model call's wait
                if self._turn_closed(turn, done):
                    break
        except BaseException as exc:
            error, let_go = self._caught(exc)
        request = reply = response = turn = answer = None  # what is raised keeps this frame
        if self._awaits_end() or let_go is not None:
            await self.finalize(error)
        else:  # nothing to await at the end: its steps in a row (``finalize`` without awaits)
            self._finalized(error)
        stop = self.run.stop_reason
        if stop is None:
            return self.run
        del self, error  # the error's traceback keeps this frame: nothing of the run in it
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
        if isinstance(exc, asyncio.CancelledError) and self.cancelled:
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
        name = self.run.last_agent
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
        tokens = self.tokens
        if len(tokens) > 1:
            tokens[-1].cancel()
        task.cancel()

    def _awaits_start(self) -> bool:
        """Whether the run's start awaits anything: tool sources, hooks, instructions, checks."""
        own = self.own
        return bool(
            own["_toolsets"].toolsets
            or own["_hooks"]
            or own["_prompt"] is not None
            or (own["memory"] if "memory" in own else type(self.agent).memory) is not None
            or self.plan is not None
            or self.run.last_agent is not None
            or self.guarding is not None
            or self.resuming is not None
        )

    async def _start(self) -> None:
        agent, session = self.agent, self.session
        self.check_cancel()
        if agent._toolsets.toolsets:  # MCP servers and other tool sources
            await agent._refresh_tools(self, starting=True)
        self._begun()
        for hook in agent._hooks:
            if overrides(hook, Hook, "on_run_start"):
                await hook.on_run_start(self.run)
        await run_instructions(session, self)
        self._measured()
        if self.resuming is not None:  # a continued paused run: its paused turn first
            from agentloop.engine.pause import complete_paused_turn

            await complete_paused_turn(session, self)
        elif self.guarding is not None:  # (a continued run was checked)
            await self.guarding.start()

    def _awaits_end(self) -> bool:
        """Whether the run's end awaits anything: a guardrail check, memory writes, hooks."""
        own = self.own
        memory = own["memory"] if "memory" in own else type(self.agent).memory
        return bool(self.guarding is not None or memory is not None or own["_hooks"])

    def _opened(self) -> None:
        """``_start`` for a run whose start awaits nothing (``_awaits_start``).

        ``check_cancel`` only with a token to check (a call fewer for most runs).
        """
        if self.tokens:
            self.check_cancel()
        self._begun()
        self._measured()

    def _begun(self) -> None:
        """The record begun, the limits zeroed, ``RunStarted``."""
        session, run = self.session, self.run
        if session._recorder is not None:
            session._recorder.begin(run)
        session.safety.begin(self.budget)
        if session._bus.active:
            session._bus.emit(ev.RunStarted(run.id, 0, run))

    def _measured(self) -> None:
        """The starting transcript measured; an append-only base, a handoff's view (26, 28)."""
        self.start(self.transcript, self.offer.specs, self.measured)  # (the guard: the state)
        if self.appendonly is not None:  # SPEC 28: the conversation's base, built once
            self.appendonly.open(self.session, self)
        if self.shown is not None:  # a paused filtered handoff's view is what is sent (26)
            handoffs.measure(self)

    def _offering(self) -> bool:
        """Whether this call has an offer step (a run with none of them pays four reads)."""
        return bool(
            self.own["_toolsets"].toolsets
            or self.plan is not None
            or self.appendonly is not None
            or self.run.last_agent is not None  # a receiver's own tool sources (SPEC 26)
        )

    async def _offer(self) -> None:
        """Before each model call: the tools it offers, and what changed since the last call.

        Tool sources are refreshed (an MCP list change), the toolsets' plan picks this call's
        tools (SPEC 22); on an append-only conversation each difference is a system entry (28).
        """
        agent = self._ruling()  # a handoff's receiver: its tool sources (26)
        if agent._toolsets.toolsets:
            await agent._refresh_tools(self, starting=False)
        if self.plan is not None:  # the tools this call offers (SPEC 22)
            await self.plan.offer(self)
        if self.appendonly is not None:  # what changed since the last call, at the end
            self.appendonly.record(self)

    def _model_call(self) -> Awaitable[ModelResponse | None]:
        """Any other model call, to await: a guardrail's race, a stream, or its step prepared.

        Not a coroutine itself: a streamed or guarded call is as deep as the common one.
        """
        if self._offering() or not self.ready():
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
        if self._offering():
            await self._offer()
        if not self.ready():  # the state is its context guard (``engine.context_guard``)
            await compaction.before_call(self, self._commit_compacted)

    def _turn_closed(self, turn: Turn, done: bool | None) -> bool:
        """The turn recorded as done; true when the run has its answer."""
        session, guarding = self.session, self.guarding
        if guarding is not None:
            guarding.release()
        handing = self.handoff is not None
        session._turn_done(self, turn)
        if handing:  # the receiver's output guardrails rule from the next turn (SPEC 26)
            self.guarding = guarding_of.run_guard(session, self, self._ruling())
        if done:
            return True
        self.turn_index += 1
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
            return self._dispatched(turn, response, calls)  # False, or what awaits the calls
        text = turn.text  # the reply's, as ``_record`` kept it
        turns = self.run.turns
        if len(turns) > 1 and turns[-2].stop_reason == PAUSE_TURN:  # one answer (SPEC 24)
            text = answer_text(turns, text)
        safety = self.session.safety
        if safety.detection_on:  # ``converge``: a raising detector switches detection off
            try:
                status = safety.converge(text)
            except Exception as exc:
                safety.poisoned("the convergence detector", exc)
                status = None
            if status is not None:
                stop = safety.converged(self.run, status)
                if stop is not None:
                    raise stop
        if self.guarding is not None and self.guarding.guardrails.output:
            return self._guarded_answer(turn, response, text)
        self.run.output = text
        return True

    async def _guarded_answer(self, turn: Turn, response: ModelResponse, text: str) -> bool:
        """An untyped answer past the output guardrails: the output, or a soft rejection."""
        rejected = await self._guard_output(turn, response, text)
        if rejected is not None:
            self.append(Message.user(rejected))
            return False
        self.run.output = text
        return True

    async def _guard_output(self, turn: Turn, response: ModelResponse, value: Any) -> str | None:
        """The output guardrails on an answer: None to accept it, else the soft rejection."""
        guarding = self.guarding
        if guarding is None or not guarding.guardrails.output:
            return None
        return await guarding.check_output(turn, response, value)

    def _commit_compacted(self, messages: list[Message]) -> None:
        """Compaction is a commit point: its result becomes the history."""
        session = self.session
        if session._recorder is not None:
            session._recorder.compacted(self.run, messages, len(self.audit))
        session._history = list(messages)
        self.replace(messages)

    async def finalize(self, error: AgentLoopError | None) -> None:
        """Record how the run ended, commit its history, tell hooks and observers."""
        self.finalizing = True
        guarding, self.guarding = self.guarding, None  # it holds the loop: no cycle outlives it
        if guarding is not None:  # a pending check stops: nothing it held goes out
            await guarding.close()
        paused = ending.committed(self, error)
        if self.agent.memory is not None:  # the committed turns' memory writes, applied
            error = await remembering.finish(self.session, self, error, bool(paused))
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
