"""``Agent``: the loop, as a short sequence of named steps.

A run: accept input → (check cancel → max turns → model call → record → dispatch tools →
one ``tool`` message) until a reply without tool calls → finalize. Every exit goes through
``_finalize``, which records ``stop_reason`` and commits history three ways (success: all;
cannot-fit family: nothing; anything else: the completed turns). With a ``store``, every commit
point (run start, each completed turn, the compaction commit, finalize) is also written there
(``agentloop.store``); ``Agent.resume`` rebuilds an agent from it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypedDict, Unpack

from agentloop._compaction import ContextGuard
from agentloop._dispatch import Dispatcher
from agentloop._safety import SafetyState
from agentloop._turn import ClientEventBridge, RunState, build_request, call_model
from agentloop.cancel import CancelToken
from agentloop.config import RunConfig
from agentloop.errors import (
    AgentLoopError,
    Cancelled,
    CompactionStalled,
    ConfigurationError,
    ContextExceeded,
    ContextLengthExceeded,
    InternalError,
    InvalidInput,
    MaxTurnsExceeded,
    MemoryBackendError,
)
from agentloop.hooks import Approver, Hook, overrides
from agentloop.messages import Message
from agentloop.model import ModelClient, ModelResponse
from agentloop.observers import Observer, ObserverFanout
from agentloop.run import Run, Turn
from agentloop.store import Store
from agentloop.store._session import SessionRecorder, restore
from agentloop.tools import Tool, ToolRegistry
from agentloop.transcript import close_interrupted

__all__ = ["Agent"]

logger = logging.getLogger("agentloop")

_CANNOT_FIT = (ContextExceeded, CompactionStalled, ContextLengthExceeded)


class AgentOptions(TypedDict, total=False):
    """The keyword arguments ``Agent.resume`` passes on to ``Agent``."""

    tools: Iterable[Tool | Callable[..., Any]] | ToolRegistry
    system: str | None
    config: RunConfig | None
    hooks: Sequence[Hook]
    observers: Sequence[Observer]
    approver: Approver | None


class Agent:
    """An LLM agent: a model client, tools, a system prompt and the committed history."""

    def __init__(
        self,
        client: ModelClient,
        *,
        tools: Iterable[Tool | Callable[..., Any]] | ToolRegistry = (),
        system: str | None = None,
        config: RunConfig | None = None,
        hooks: Sequence[Hook] = (),
        observers: Sequence[Observer] = (),
        approver: Approver | None = None,
        store: Store | None = None,
        session_id: str | None = None,
    ) -> None:
        if client is None or not callable(getattr(client, "complete", None)):
            raise ConfigurationError("Agent needs a model client (a ModelClient)", field="client")
        config = RunConfig() if config is None else config
        if not isinstance(config, RunConfig):
            raise ConfigurationError("Agent config must be a RunConfig", field="config")
        if not config.headless and approver is None:
            raise ConfigurationError(
                "RunConfig(headless=False) needs Agent(approver=...) to answer Ask",
                field="approver",
            )
        self.client = client
        self.registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.system = system
        self.config = config
        self.session_id = session_id or uuid.uuid4().hex
        self.store = store
        self.persistence_error: MemoryBackendError | None = None
        self._recorder = _recorder(store, self.session_id, existing_ok=session_id is None)
        self._hooks = tuple(hooks)
        self._observers = ObserverFanout(tuple(observers))
        self._history: list[Message] = []
        self._runs: list[Run] = []
        self._cancel = CancelToken()
        self._active: RunState | None = None
        self.safety = SafetyState(config, self._observers)
        self._dispatcher = Dispatcher(
            safety=self.safety,
            registry=self.registry,
            config=config,
            hooks=self._hooks,
            observers=self._observers,
            approver=approver,
            session_id=self.session_id,
        )

    @classmethod
    def resume(
        cls,
        session_id: str,
        *,
        store: Store,
        client: ModelClient,
        **agent_kwargs: Unpack[AgentOptions],
    ) -> Agent:
        """Rebuild the agent of a stored session: its history and runs (failed ones included).

        A run the process never finalized is closed as a salvaging finalize would have closed
        it (see ``agentloop.store``). An unknown session gives an agent with no history.
        """
        agent = cls(client, session_id=session_id, **agent_kwargs)
        history, runs = restore(_checked_store(store), session_id)
        agent.store = store
        agent._recorder = SessionRecorder(store, session_id, synced=len(history))
        agent._history = history
        agent._runs = runs
        return agent

    @property
    def history(self) -> list[Message]:
        """Committed messages (a copy)."""
        return list(self._history)

    @property
    def runs(self) -> list[Run]:
        """Every run, failed ones included."""
        return list(self._runs)

    @property
    def current_run(self) -> Run | None:
        """The last run."""
        return self._runs[-1] if self._runs else None

    @property
    def cancel_token(self) -> CancelToken:
        """The agent's own cancel signal."""
        return self._cancel

    def cancel(self) -> None:
        """Fire the agent's cancel signal: the running (or else the next) run is cancelled."""
        self._cancel.cancel()

    def run_sync(self, input: str, *, cancel: CancelToken | None = None) -> Run:
        """The one sync facade: ``asyncio.run(agent.run(...))``."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(input, cancel=cancel))
        raise InvalidInput("run_sync() was called inside a running event loop; await run()")

    async def run(self, input: str, *, cancel: CancelToken | None = None) -> Run:
        """Run the agent on ``input``; raise the hard error that ended it, after finalizing."""
        if not isinstance(input, str):
            raise InvalidInput(f"run() input must be a str, got {type(input).__name__}")
        if self._active is not None:
            raise InvalidInput(
                "this Agent is already running; one Agent runs one conversation at a time "
                "(create an Agent per concurrent conversation)"
            )
        state = self._start(input, cancel)
        self._active = state
        inner = asyncio.get_running_loop().create_task(self._execute(state))

        def on_cancel() -> None:
            if not state.finalizing:
                inner.cancel()

        state.watch_handles = [(t, t.watch(on_cancel)) for t in state.tokens]
        try:
            return await inner
        except asyncio.CancelledError:
            if not state.finalizing:  # cancelled before the run's own task ever started
                await self._finalize(state, Cancelled())
            raise

    def _start(self, input: str, cancel: CancelToken | None) -> RunState:
        run = Run(id=uuid.uuid4().hex, input=input, started_at=time.time())
        self._runs.append(run)
        transcript = list(self._history)
        base = len(transcript)
        transcript.append(Message.user(input))
        tokens = (self._cancel,) if cancel is None else (self._cancel, cancel)
        state = RunState(
            run=run,
            tokens=tokens,
            transcript=transcript,
            base=base,
            advertised=frozenset(self.registry.names()),
            specs=self.registry.specs(),
        )
        state.events = ClientEventBridge(run, self._observers)
        return state

    async def _execute(self, state: RunState) -> Run:
        try:
            state.check_cancel()
            if self._recorder is not None:
                self._recorder.begin(state.run)
            self.safety.budget_begin()
            await self._run_start(state)
            await self._loop(state, self._guard(state))
        except asyncio.CancelledError:
            if not state.cancelled:
                await self._finalize(state, Cancelled())
                raise
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            await self._finalize(state, Cancelled())
        except AgentLoopError as error:
            await self._finalize(state, error)
        except Exception as exc:
            await self._finalize(state, _internal(exc))
        except BaseException:  # KeyboardInterrupt / SystemExit: record the run, then let go
            await self._finalize(state, Cancelled())
            raise
        else:
            await self._finalize(state, None)
        stop = state.run.stop_reason
        if stop is not None:
            raise stop
        return state.run

    def _guard(self, state: RunState) -> ContextGuard:
        guard = ContextGuard(
            self.config,
            system=self.system,
            specs=state.specs,
            observers=self._observers,
            hooks=self._hooks,
        )
        guard.start(state.transcript)
        return guard

    async def _run_start(self, state: RunState) -> None:
        self._observers.emit("on_run_start", state.run)
        for hook in self._hooks:
            if overrides(hook, Hook, "on_run_start"):
                await hook.on_run_start(state.run)

    async def _loop(self, state: RunState, guard: ContextGuard) -> None:
        while True:
            state.check_cancel()
            if state.turn_index >= self.config.max_turns:
                raise MaxTurnsExceeded(self.config.max_turns)
            await guard.before_call(state, lambda messages: self._commit_compacted(state, messages))
            self.safety.budget_check(state.run)
            response = await self._model_step(state, guard)
            if response is None:
                continue
            turn = self._record(state, guard, response)
            if not response.tool_calls:
                self._converge(state, response)
            else:
                results = await self._dispatcher.dispatch_turn(state, response.tool_calls)
                turn.tool_results = results
                self._append(state, guard, Message.tool_results(results))
            state.complete_turn()
            if self._recorder is not None:
                self._recorder.turn_completed(state.run, state.audit)
            self.safety.budget_turn()
            self._observers.emit("on_turn_end", state.run, turn)
            if not response.tool_calls:
                state.run.output = response.text
                return
            state.turn_index += 1

    async def _model_step(self, state: RunState, guard: ContextGuard) -> ModelResponse | None:
        """One model call; None when a context rejection sends the turn back for compaction."""
        self._observers.emit("on_turn_start", state.run, state.turn_index)
        request = build_request(state, self.system, self.config.model_settings)
        try:
            response = await call_model(
                self.client, request, state, self._observers, self.config.stream
            )
        except ContextLengthExceeded as error:
            guard.salvage(state, error)
            return None
        self.safety.budget_usage(response.usage, response.model or self.client.model)
        self._observers.emit("on_response", state.run, response)
        return response

    def _record(self, state: RunState, guard: ContextGuard, response: ModelResponse) -> Turn:
        turn = Turn(
            index=state.turn_index,
            model=response.model or self.client.model,
            tool_calls=list(response.tool_calls),
            usage=response.usage,
            stop_reason=response.stop_reason,
            text=response.text,
        )
        state.run.turns.append(turn)
        state.run.usage = state.run.usage + response.usage
        if response.message.parts and (response.tool_calls or response.text):
            self._append(state, guard, response.message)
        return turn

    def _converge(self, state: RunState, response: ModelResponse) -> None:
        """Terminal replies feed convergence detection; stop/ask_user end the run here."""
        stop = self.safety.converge(state.run, response.text)
        if stop is not None:
            raise stop

    def _append(self, state: RunState, guard: ContextGuard, message: Message) -> None:
        state.append(message)
        guard.added(message)

    def _commit_compacted(self, state: RunState, messages: list[Message]) -> None:
        """Compaction is a commit point: its result becomes the history."""
        if self._recorder is not None:
            self._recorder.compacted(state.run, messages, len(state.audit))
        self._history = list(messages)
        state.replace(messages)

    async def _finalize(self, state: RunState, error: AgentLoopError | None) -> None:
        state.finalizing = True
        self._active = None
        for token, handle in state.watch_handles:
            token.unwatch(handle)
        run = state.run
        run.ended_at = time.time()
        run.stop_reason = error
        run.messages = list(state.audit) if error is None else close_interrupted(state.audit)
        self._commit(state, error)
        if self._recorder is not None:
            self.persistence_error = self._recorder.finished(run, self._history)
        self.safety.end_run()
        if error is not None and error.summary is None:
            error.summary = run.summary()
        for hook in self._hooks:
            if overrides(hook, Hook, "on_run_end"):
                try:
                    await hook.on_run_end(run)
                except Exception:
                    logger.exception("hook %r raised in on_run_end; ignored", hook)
        self._observers.emit("on_run_end", run)
        if self._cancel.cancelled:
            self._cancel.reset()

    def _commit(self, state: RunState, error: AgentLoopError | None) -> None:
        """Three-way retention: all on success, nothing for cannot-fit, else completed turns."""
        if error is None:
            self._history.extend(state.pending)
        elif isinstance(error, _CANNOT_FIT):
            state.run.unfinished_input = state.run.input
        else:
            self._history.extend(state.transcript[state.base : state.boundary])


def _checked_store(store: object) -> Store:
    if not isinstance(store, Store):
        raise ConfigurationError("Agent store must implement agentloop.store.Store", field="store")
    return store


def _recorder(store: Store | None, session_id: str, existing_ok: bool) -> SessionRecorder | None:
    """The session's recorder; a named session that already has data needs ``resume``."""
    if store is None:
        return None
    store = _checked_store(store)
    if not existing_ok and store.has_session(session_id):
        raise ConfigurationError(
            f"session {session_id!r} already has stored runs; continue it with "
            "Agent.resume(session_id, store=..., client=...)",
            field="session_id",
        )
    return SessionRecorder(store, session_id)


def _internal(exc: Exception) -> InternalError:
    error = InternalError(f"unexpected {type(exc).__name__} in the engine: {exc}")
    error.__cause__ = exc
    return error
