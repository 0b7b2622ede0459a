"""``Session``: one conversation on an agent's definition, and the ways to run on it (SPEC 20).

An ``Agent`` is a definition an application builds once and shares; each conversation is a
``Session`` (``agent.session(...)``), and ``agent.run()`` uses the agent's default one. Sessions
of one agent run concurrently; one session runs one run at a time. The state a session owns is
``agentloop.engine.conversation``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from agentloop._util.peers import hinting
from agentloop.cancel import CancelToken
from agentloop.engine import peers
from agentloop.engine.conversation import Conversation
from agentloop.engine.state import PerRun, RunOptions, RunState
from agentloop.errors import ConfigurationError, InvalidInput
from agentloop.messages import Message, UserInput
from agentloop.model import ModelSettings
from agentloop.pausing import Decision
from agentloop.run import OutputT, Run
from agentloop.safety.budget import Budget

if TYPE_CHECKING:  # the run's own rooms load with the first run, not with the import
    from agentloop.engine.loop import RunLoop
    from agentloop.engine.stream import RunStream
    from agentloop.events import Event
    from agentloop.toolsets import AbstractToolset

__all__ = ["Session"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _awaited(run: _F) -> _F:
    """``run`` returns its coroutine: on 3.12+ it still reads as ``async def`` (``inspect``)."""
    if hasattr(inspect, "markcoroutinefunction"):
        inspect.markcoroutinefunction(run)
    return run


class Session(Conversation[OutputT]):
    """One conversation of an agent: its own history and runs on the agent's definition.

    ``run``, ``run_sync``, ``stream``, ``continue_run`` and ``cancel_run`` behave as the agent's
    own do;
    ``history`` and ``runs`` are this conversation's. Make one with ``agent.session()``.
    """

    # -- running -----------------------------------------------------------------------------

    @hinting(peers.RUN)
    @_awaited
    def run(
        self,
        input: UserInput,
        *,
        deps: Any = None,
        cancel: CancelToken | None = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        model_settings: ModelSettings | None = None,
        usage_limits: Budget | None = None,
    ) -> Coroutine[Any, Any, Run[OutputT]]:
        """Run on ``input`` in this conversation; raise the hard error that ended it.

        The run is finalized first; ``deps`` reaches tools and hooks as ``ctx.deps``.
        ``model_settings`` and ``usage_limits`` replace the config's ``model_settings`` and
        ``budget`` for this run only. Await it: it is the run's own coroutine (``RunLoop.drive``,
        which checks the arguments and begins the run at its first step), not one around it.
        """
        loop = (_RunLoop or _load_loop())(self)
        return loop.drive(input, deps, cancel, toolsets, model_settings, usage_limits)

    @hinting(peers.RUN)
    def run_sync(
        self,
        input: UserInput,
        *,
        deps: Any = None,
        cancel: CancelToken | None = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        model_settings: ModelSettings | None = None,
        usage_limits: Budget | None = None,
    ) -> Run[OutputT]:
        """``run()`` on the agent's private event loop (see ``Agent.run_sync``)."""
        Message.from_input(input)  # InvalidInput before the loop starts
        RunOptions.checked(model_settings, usage_limits, toolsets)
        options: PerRun = {"model_settings": model_settings, "usage_limits": usage_limits}
        work = self.run(input, deps=deps, cancel=cancel, toolsets=toolsets, **options)
        run_sync = self.agent._run_sync
        del self  # a failed run's traceback keeps this frame: nothing of the session in it
        return run_sync(work)

    @hinting(peers.RUN)
    def stream(
        self,
        input: UserInput,
        *,
        deps: Any = None,
        cancel: CancelToken | None = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        model_settings: ModelSettings | None = None,
        usage_limits: Budget | None = None,
    ) -> RunStream[OutputT]:
        """Run and receive the events as they happen (see ``Agent.stream``)."""
        Message.from_input(input)  # InvalidInput at the call, not when the block is entered
        options = RunOptions.checked(model_settings, usage_limits, toolsets)
        from agentloop.engine.stream import RunStream

        return RunStream(self, input, deps, cancel, options)

    async def continue_run(
        self,
        *,
        decisions: Mapping[str, Decision] | None = None,
        deps: Any = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        cancel: CancelToken | None = None,
    ) -> Run[OutputT]:
        """Continue a paused run with ``decisions``, or the run a crash cut off (as the agent's)."""
        from agentloop.engine.pause import ready_to_continue

        extra = self._continue_toolsets(toolsets)
        deps = await ready_to_continue(self, decisions, deps, extra)
        cancels = () if cancel is None else (cancel,)
        work = self._drive(self._continued(decisions, deps, cancels, toolsets=extra))
        del self  # as in run()
        return await work

    def continue_run_sync(
        self,
        *,
        decisions: Mapping[str, Decision] | None = None,
        deps: Any = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        cancel: CancelToken | None = None,
    ) -> Run[OutputT]:
        """``continue_run()`` on the agent's private event loop."""
        self._continue_toolsets(toolsets)  # InvalidInput before the loop starts
        work = self.continue_run(decisions=decisions, deps=deps, toolsets=toolsets, cancel=cancel)
        run_sync = self.agent._run_sync
        del self  # as in run_sync()
        return run_sync(work)

    async def cancel_run(self) -> Run[OutputT]:
        """End this conversation's paused or waiting run as ``Cancelled`` (as the agent's)."""
        from agentloop.engine.cancelling import cancel_paused

        return await cancel_paused(self)

    def cancel_run_sync(self) -> Run[OutputT]:
        """``cancel_run()`` on the agent's private event loop."""
        return self.agent._run_sync(self.cancel_run())

    def continue_stream(
        self,
        *,
        decisions: Mapping[str, Decision] | None = None,
        deps: Any = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        cancel: CancelToken | None = None,
    ) -> RunStream[OutputT]:
        """``continue_run()`` as a stream of its events (see ``Agent.continue_stream``)."""
        from agentloop.engine.stream import RunStream

        options = RunOptions(toolsets=self._continue_toolsets(toolsets))
        return RunStream(self, None, deps, cancel, options, decisions=decisions, resume=True)

    def _continue_toolsets(self, toolsets: object) -> tuple[Any, ...]:
        """``continue_run(toolsets=...)``, checked: the run's own toolsets, passed again."""
        options = RunOptions.checked(None, None, toolsets)
        if options is None or not options.toolsets:
            return ()
        if self.agent.config.batch:
            raise ConfigurationError(
                "continue_run(toolsets=...) on a batch agent: its turns continue in "
                "agentloop.batch.poll, which has the agent's own toolsets only; give them to "
                "the agent, Agent(..., toolsets=[...])",
                field="toolsets",
            )
        return options.toolsets

    def _continued(
        self,
        decisions: Mapping[str, Decision] | None,
        deps: Any,
        cancels: tuple[CancelToken, ...],
        listener: Callable[[Event], None] | None = None,
        *,
        toolsets: tuple[Any, ...] = (),
    ) -> RunState:
        """The state of the run to continue: a paused one, or one a crash cut off.

        ``toolsets``: ``continue_run(toolsets=...)``, offered by the continued run instead of
        those its ``run(toolsets=...)`` left with this session (kept only if it starts).
        """
        last = self._latest
        kept = self._run_toolsets
        if toolsets and last is not None:
            self._run_toolsets = {last.id: toolsets}
        try:
            return self._reopened(last, decisions, deps, cancels, listener)
        except BaseException:
            self._run_toolsets = kept
            raise

    def _reopened(
        self,
        last: Run[OutputT] | None,
        decisions: Mapping[str, Decision] | None,
        deps: Any,
        cancels: tuple[CancelToken, ...],
        listener: Callable[[Event], None] | None,
    ) -> RunState:
        """The state of ``last`` reopened: a batch run's result, a paused run or a crashed one."""
        if last is not None and last.waiting is not None and decisions is None:
            from agentloop.engine.batching import reopen_waiting  # a batch run's result (SPEC 25)

            state = reopen_waiting(self, last, deps, cancels)
        elif last is not None and (last.pending or decisions is not None):
            from agentloop.engine.pause import reopen_paused

            state = reopen_paused(self, last, decisions, deps, cancels)
        elif decisions is not None:
            raise InvalidInput(
                f"session {self.id!r} has no paused run: decisions answer a paused run's "
                "pending calls (run.pending)"
            )
        else:
            from agentloop.engine.resume import reopen

            state = reopen(self, deps, cancels)
        journal = self._journal
        if journal is not None:
            from agentloop.engine.journal import ReplayClient

            state.client = ReplayClient(state.client, journal.reply, lambda: state.turn_index)
        if listener is not None:
            state.listener = listener
            self._bus.attach(listener)
        return state

    def _new_loop(self) -> RunLoop:
        """A new run's loop, which is its state (``Conversation._new_state`` fills it)."""
        return (_RunLoop or _load_loop())(self)

    def _drive(self, state: RunState) -> Coroutine[Any, Any, Run[OutputT]]:
        """The run's steps over ``state``, to await (no coroutine frame of its own)."""
        loop = cast("RunLoop", state)  # every state is its run's loop (``_new_state``)
        return loop._bind().drive()


_RunLoop: type[RunLoop] | None = None
"""``agentloop.engine.loop.RunLoop``, imported with the first run (not with the session)."""


def _load_loop() -> type[RunLoop]:
    global _RunLoop
    from agentloop.engine.loop import RunLoop as loop

    _RunLoop = loop
    return loop
