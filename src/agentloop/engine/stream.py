"""``agent.stream()``: a run's events as an async iterator, inside an async context manager.

The run starts when the block is entered (a busy agent raises ``InvalidInput`` there) and
runs in its own task; every event goes into an unbounded queue, so the engine never waits for
the consumer and nothing is dropped. After ``RunFinished`` the iterator ends, or raises the
run's hard error. Leaving the block before the run ended cancels it (it is finalized as
``Cancelled``) and waits for its task, so no task outlives the block.

A stream has one consumer: a second task waiting for the next event while one already waits is
refused with ``InvalidInput`` (it would otherwise wait forever, since an event wakes one
waiter). Every misuse (entering twice, ``run`` before the block, ``for`` instead of
``async for``) says what to write instead, as ``InvalidInput`` or ``TypeError``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Generic, NoReturn, Protocol

from agentloop.cancel import CancelToken
from agentloop.engine.state import RunOptions, RunState
from agentloop.errors import AgentLoopError, InvalidInput
from agentloop.events import Event
from agentloop.messages import UserInput
from agentloop.pausing import Decision
from agentloop.run import OutputT, Run

__all__ = ["RunStream"]

_END = object()

_USE = (
    "agent.stream() is used as `async with agent.stream(input) as events: "
    "async for event in events: ...` (the block starts the run and cleans up after it)"
)


class Starts(Protocol[OutputT]):
    """What a stream starts a run on (a ``Session``)."""

    def _begin(
        self,
        input: UserInput,
        deps: Any,
        cancels: tuple[CancelToken, ...],
        listener: Callable[[Event], None] | None,
        *,
        stream: bool = ...,
        options: RunOptions | None = ...,
    ) -> RunState: ...

    def _drive(self, state: RunState) -> Coroutine[Any, Any, Run[OutputT]]: ...

    def _continued(
        self,
        decisions: Mapping[str, Decision] | None,
        deps: Any,
        cancels: tuple[CancelToken, ...],
        listener: Callable[[Event], None] | None = ...,
        *,
        toolsets: tuple[Any, ...] = ...,
    ) -> RunState: ...


class RunStream(Generic[OutputT]):
    """The events of one run: ``async with agent.stream(x) as events: async for e in events``."""

    def __init__(
        self,
        session: Starts[OutputT],
        input: UserInput | None,
        deps: Any,
        cancel: CancelToken | None,
        options: RunOptions | None = None,
        *,
        decisions: Mapping[str, Decision] | None = None,
        resume: bool = False,
    ) -> None:
        self._session = session
        self._resume = resume
        self._decisions = decisions
        self._options = options
        self._input = input
        self._deps = deps
        self._cancel = cancel
        self._stop = CancelToken()
        self._buffer: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[Run[OutputT]] | None = None
        self._run: Run[OutputT] | None = None
        self._ended = False

    @property
    def run(self) -> Run[OutputT]:
        """The ``Run`` being streamed (filled in as it goes; final after ``RunFinished``)."""
        if self._run is None:
            raise InvalidInput(f"the stream has not started: {_USE}")
        return self._run

    async def __aenter__(self) -> RunStream[OutputT]:
        if self._task is not None:
            raise InvalidInput(
                "a stream can be entered once: call agent.stream(input) again for another run"
            )
        cancels = (self._stop,) if self._cancel is None else (self._cancel, self._stop)
        if self._resume:  # continue_stream(): a paused run's decisions, or a crashed run
            from agentloop.engine.pause import ready_to_continue

            extra = () if self._options is None else self._options.toolsets
            deps = await ready_to_continue(self._session, self._decisions, self._deps, extra)
            state = self._session._continued(
                self._decisions, deps, cancels, self._push, toolsets=extra
            )
        else:
            assert self._input is not None
            state = self._session._begin(
                self._input, self._deps, cancels, self._push, stream=True, options=self._options
            )
        state.stream = True
        self._run = state.run
        self._task = asyncio.get_running_loop().create_task(self._session._drive(state))
        self._task.add_done_callback(lambda _: self._push(_END))
        return self

    def _push(self, item: Any) -> None:
        """The engine's listener: buffer the event, wake the consumer if it waits."""
        self._buffer.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    if not TYPE_CHECKING:  # a runtime hint; type checkers still see it is not iterable

        def __iter__(self) -> NoReturn:
            raise TypeError(_USE)

    def __aiter__(self) -> RunStream[OutputT]:
        return self

    async def __anext__(self) -> Event:
        buffer = self._buffer
        if not buffer:  # (nothing is queued before the block is entered, or after the end)
            if self._task is None:
                raise TypeError(_USE)
            if self._ended:
                raise StopAsyncIteration
            while not buffer:
                await self._wait()
        item = buffer.popleft()
        if item is not _END:
            return item  # type: ignore[no-any-return]
        self._ended = True
        task = self._task
        assert task is not None  # _END is pushed by the task's own done callback
        error = None if task.cancelled() else task.exception()
        del self, buffer, task  # a failed run's traceback keeps this frame (engine.frames)
        if error is not None:
            try:
                raise error
            finally:
                del error
        raise StopAsyncIteration

    async def _wait(self) -> None:
        """Wait for the next push; a second waiter at once is refused (one would hang)."""
        if self._waiter is not None:
            raise InvalidInput(
                "a stream has one consumer: another task is already waiting for its next event "
                "(read it in one `async for` and hand events on, e.g. through an asyncio.Queue)"
            )
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:  # a consumer cancelled while waiting is no longer one
            if self._waiter is waiter:
                self._waiter = None

    async def __aexit__(self, *exc_info: object) -> None:
        task = self._task
        if task is None:
            return
        if not task.done():
            self._stop.cancel()  # left early: the run is finalized as Cancelled
        del self, exc_info  # the run's error, raised here too, keeps this frame (engine.frames)
        try:
            await task  # a cancel of this block is passed on to the run, which then finalizes
        except AgentLoopError:
            pass  # delivered by iteration, or the block left before reading it
        finally:
            del task
