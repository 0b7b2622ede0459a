"""``Agent``: the loop, as a short sequence of named steps.

A run: accept input → (check cancel → max turns → model call → record → dispatch tools →
one ``tool`` message) until a reply without tool calls → finalize. Every exit goes through
``_finalize``, which records ``stop_reason`` and commits history three ways (success: all;
cannot-fit family: nothing; anything else: the completed turns). With a ``store``, every commit
point (run start, each completed turn, the compaction commit, finalize) is also written there
(``agentloop.store``); ``Agent.resume`` rebuilds an agent from it. With an ``output_type`` the
final answer is validated (``agentloop._output``); everything the run reports travels as one
event stream (``agentloop.events``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Generic, TypedDict, TypeGuard, Unpack, cast, overload

from agentloop import events as ev
from agentloop._compaction import ContextGuard
from agentloop._dispatch import Dispatcher
from agentloop._output import (
    ACCEPTED_TEXT,
    CALL_FINAL_RESULT_TEXT,
    FINAL_RESULT,
    NOT_EXECUTED_TEXT,
    TRUNCATED_TEXT,
    InvalidOutput,
    OutputType,
)
from agentloop._safety import SafetyState
from agentloop._stream import RunStream
from agentloop._toolsets import Toolsets
from agentloop._turn import ClientEventBridge, RunState, build_request, call_model
from agentloop.cancel import CancelToken
from agentloop.config import RunConfig
from agentloop.durable.journal import Journal, JournaledTools, ReplayClient
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
    OutputValidationFailed,
    TranscriptError,
)
from agentloop.hooks import Approver, Hook, overrides
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import ModelClient, ModelResponse, ToolSpec
from agentloop.observers import EventBus, Observer
from agentloop.run import TRUNCATION_REASONS, OutputT, Run, Turn
from agentloop.safety.redact import redact_secrets
from agentloop.store import Store
from agentloop.store._session import SessionRecorder, continuable, load_safety, restore
from agentloop.tools import Tool, ToolRegistry, Toolset
from agentloop.transcript import close_interrupted, validate_transcript

__all__ = ["Agent"]

logger = logging.getLogger("agentloop")

_CANNOT_FIT = (ContextExceeded, CompactionStalled, ContextLengthExceeded)
_NATIVE_PROVIDERS = frozenset({"openai", "openrouter", "ollama", "gemini"})


class AgentOptions(TypedDict, total=False):
    """The keyword arguments ``Agent.resume`` passes on to ``Agent``."""

    tools: Iterable[Tool | Toolset | Callable[..., Any]] | ToolRegistry
    system: str | None
    config: RunConfig | None
    hooks: Sequence[Hook]
    observers: Sequence[Observer]
    approver: Approver | None


class Agent(Generic[OutputT]):
    """An LLM agent: a model client, tools, a system prompt and the committed history.

    ``Agent(client)`` answers with text (``run.output`` is ``str | None``);
    ``Agent(client, output_type=Invoice)`` answers with a validated ``Invoice``.
    """

    @overload
    def __init__(
        self: Agent[str | None],
        client: ModelClient,
        *,
        output_type: None = None,
        tools: Iterable[Tool | Toolset | Callable[..., Any]] | ToolRegistry = (),
        system: str | None = None,
        config: RunConfig | None = None,
        hooks: Sequence[Hook] = (),
        observers: Sequence[Observer] = (),
        approver: Approver | None = None,
        store: Store | None = None,
        session_id: str | None = None,
        history: Sequence[Message] | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[OutputT],
        client: ModelClient,
        *,
        output_type: type[OutputT],
        tools: Iterable[Tool | Toolset | Callable[..., Any]] | ToolRegistry = (),
        system: str | None = None,
        config: RunConfig | None = None,
        hooks: Sequence[Hook] = (),
        observers: Sequence[Observer] = (),
        approver: Approver | None = None,
        store: Store | None = None,
        session_id: str | None = None,
        history: Sequence[Message] | None = None,
    ) -> None: ...

    def __init__(
        self,
        client: ModelClient,
        *,
        output_type: type[Any] | None = None,
        tools: Iterable[Tool | Toolset | Callable[..., Any]] | ToolRegistry = (),
        system: str | None = None,
        config: RunConfig | None = None,
        hooks: Sequence[Hook] = (),
        observers: Sequence[Observer] = (),
        approver: Approver | None = None,
        store: Store | None = None,
        session_id: str | None = None,
        history: Sequence[Message] | None = None,
    ) -> None:
        config = _checked_setup(client, config, approver)
        self.client = client
        self.registry, toolsets = _registry(tools)
        self._toolsets = Toolsets(toolsets, self.registry)
        self.system = system
        self.config = config
        self.output = _output_type(output_type, self.registry)
        self.session_id = session_id or uuid.uuid4().hex
        self.store = store
        self.persistence_error: MemoryBackendError | None = None
        self._recorder = _recorder(store, self.session_id, existing_ok=session_id is None)
        self._hooks = tuple(hooks)
        self._observers = tuple(observers)
        self._bus = EventBus(self._observers)
        self._history: list[Message] = _checked_history(history)
        self._runs: list[Run[OutputT]] = []
        self._cancel = CancelToken()
        self._active: RunState | None = None
        self._runner: asyncio.Runner | None = None
        self._closer: weakref.finalize[Any, Any] | None = None
        self.safety = SafetyState(config, self._bus)
        self._dispatcher = Dispatcher(
            safety=self.safety,
            registry=self.registry,
            config=config,
            hooks=self._hooks,
            observers=self._bus,
            approver=approver,
            session_id=self.session_id,
        )
        self._journal: Journal | None = None
        self._wire_recorder()

    def _wire_recorder(self) -> None:
        """With a durable store: safety state at each commit point, tool outputs journaled."""
        recorder = self._recorder
        if recorder is None or recorder.durable is None:
            return
        recorder.snapshot = lambda: self.safety.snapshot(self.client)
        self._journal = Journal(recorder.step)
        self._dispatcher.registry = JournaledTools(self.registry, self._journal)

    @classmethod
    def resume(
        cls,
        session_id: str,
        *,
        store: Store,
        client: ModelClient,
        **agent_kwargs: Unpack[AgentOptions],
    ) -> Agent[str | None]:
        """Rebuild the agent of a stored session: its history and runs (failed ones included).

        A run the process never finalized is closed as a salvaging finalize would have closed
        it (see ``agentloop.store``). An unknown session gives an agent with no history.
        """
        agent = Agent(client, session_id=session_id, **agent_kwargs)
        history, runs = restore(_checked_store(store), session_id)
        agent.store = store
        agent._recorder = SessionRecorder(store, session_id, synced=len(history))
        agent._history = history
        agent._runs = runs
        agent._wire_recorder()
        agent._restore_safety(store, continuing=None)
        return agent

    def _restore_safety(self, store: Store, *, continuing: Run[Any] | None) -> None:
        """Put back the stored safety state; a resumed agent drops unfired stop patterns."""
        data = load_safety(store, self.session_id)
        if data is None:
            return
        try:
            self.safety.restore(data, self.client, continuing=continuing)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MemoryBackendError(
                f"session {self.session_id!r}: the stored safety state is unreadable: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if continuing is None:
            self.safety.end_run()

    async def continue_run(
        self, *, deps: Any = None, cancel: CancelToken | None = None
    ) -> Run[OutputT]:
        """Continue the run a crash cut off, from its last completed turn; raise as ``run()``.

        Completed tool calls are never executed again: the turn in flight gets its journaled
        model reply back, and each of its tool calls that had returned gets its journaled output
        (``agentloop.durable.journal``). Needs an agent with a store (``Agent.resume``).

        Raises:
            InvalidInput: The session has no run a crash cut off.
            MemoryBackendError: Another live process is running the session.
        """
        state = self._reopened(deps, () if cancel is None else (cancel,))
        assert self._journal is not None
        client = self.client
        self.client = ReplayClient(client, self._journal.reply, lambda: state.turn_index)
        try:
            return await self._drive(state)
        finally:
            self.client = client

    def _reopened(self, deps: Any, cancels: tuple[CancelToken, ...]) -> RunState:
        """The crashed run's state, its lease taken and its closure undone in the store."""
        recorder = self._recorder
        if recorder is None or recorder.durable is None or self._journal is None:
            raise InvalidInput(
                "continue_run() needs an agent with a store: "
                "Agent.resume(session_id, store=..., client=...)"
            )
        if self._active is not None:
            raise InvalidInput("this Agent is already running")
        recorder.claim()
        try:
            return self._reopen(recorder, self._journal, deps, cancels)
        except BaseException:
            recorder.release()
            raise

    def _reopen(
        self,
        recorder: SessionRecorder,
        journal: Journal,
        deps: Any,
        cancels: tuple[CancelToken, ...],
    ) -> RunState:
        store = recorder.store
        stored = continuable(store, self.session_id)
        if stored is None:
            raise InvalidInput(
                f"session {self.session_id!r} has no run to continue: its last run ended "
                "(only a run its process never finalized can be continued)"
            )
        history, runs = restore(store, self.session_id)
        run = runs[-1]
        keep = len(history) - (len(run.messages) - stored.absorbed)
        self._history, self._runs = history[:keep], cast("list[Run[OutputT]]", runs)
        run.stop_reason, run.output, run.ended_at = None, None, None
        transcript = list(history) if run.turns else [*history, Message.user(run.input)]
        recorder.reopened(run, keep=keep)
        journal.start(run.id, recorder.durable.load_steps(run.id) if recorder.durable else {})
        self._restore_safety(store, continuing=run)
        native = self._native()
        specs = self._specs(native)
        state = RunState(
            run=run,
            tokens=(self._cancel, *cancels),
            transcript=transcript,
            base=keep,
            advertised=frozenset(s.name for s in specs),
            specs=specs,
            deps=deps,
        )
        state.audit = list(run.messages) if run.turns else transcript[keep:]
        state.turn_index = len(run.turns)
        state.complete_turn()
        state.tool_calls = sum(len(t.tool_calls) for t in run.turns)
        state.events = ClientEventBridge(run, self._bus)
        state.native_output = native
        self._active = state
        self._bus.run, self._bus.turn = run, state.turn_index
        return state

    @property
    def history(self) -> list[Message]:
        """Committed messages (a copy)."""
        return list(self._history)

    @property
    def runs(self) -> list[Run[OutputT]]:
        """Every run, failed ones included."""
        return list(self._runs)

    @property
    def current_run(self) -> Run[OutputT] | None:
        """The last run."""
        return self._runs[-1] if self._runs else None

    @property
    def cancel_token(self) -> CancelToken:
        """The agent's own cancel signal."""
        return self._cancel

    def cancel(self) -> None:
        """Fire the agent's cancel signal: the running (or else the next) run is cancelled."""
        self._cancel.cancel()

    def as_tool(self, *, name: str, description: str) -> Tool:
        """This agent as a tool of another agent: one parameter, ``input``, the child's prompt.

        Each call runs a fresh conversation of this agent (see ``fork``); its output (typed
        output as JSON) is the result, its hard error the parent's soft error
        ``agent '<name>' stopped: <ErrorClass>: <message>``.
        """
        from agentloop._agent_tool import AgentTool

        return AgentTool(self, name=name, description=description)

    def fork(self) -> Agent[OutputT]:
        """A fresh agent with this one's client, tools, prompt, config and output type.

        No history, no runs, no store; its own safety state. Observers and hooks are shared.
        """
        twin = Agent(
            self.client,
            tools=self.registry,
            system=self.system,
            config=self.config,
            hooks=self._hooks,
            observers=self._observers,
            approver=self._dispatcher.approver,
        )
        twin.output = self.output
        twin._toolsets = self._toolsets
        return cast("Agent[OutputT]", twin)

    # -- lifecycle ---------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Release the client's connections and stop tool sources (MCP servers).

        The agent stays usable: connections reopen and servers restart on demand.
        """
        try:
            await self._toolsets.aclose()
        finally:
            await self.client.aclose()

    def close(self) -> None:
        """Sync ``aclose``: also shuts the private event loop ``run_sync`` keeps."""
        if self._closer is not None:
            self._closer()
            self._closer = None
            self._runner = None
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self.aclose())
            return
        raise InvalidInput("close() was called inside a running event loop; await aclose()")

    async def __aenter__(self) -> Agent[OutputT]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __enter__(self) -> Agent[OutputT]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- running -----------------------------------------------------------------------------

    def run_sync(
        self, input: str, *, deps: Any = None, cancel: CancelToken | None = None
    ) -> Run[OutputT]:
        """The one sync facade: ``run()`` on a private event loop this agent keeps.

        The loop lives as long as the agent, so a client's connections are reused from one
        call to the next; it is shut (the client closed on it) by ``close()``, ``with agent:``,
        or at the latest when the agent is garbage-collected or the interpreter exits.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise InvalidInput("run_sync() was called inside a running event loop; await run()")
        if self._runner is None:
            self._runner = asyncio.Runner()
            self._closer = weakref.finalize(self, _shut, self._runner, self.client, self._toolsets)
        try:
            return self._runner.run(self.run(input, deps=deps, cancel=cancel))
        except (KeyboardInterrupt, SystemExit):
            self.close()  # the loop was interrupted mid-step: the next call gets a fresh one
            raise

    async def run(
        self, input: str, *, deps: Any = None, cancel: CancelToken | None = None
    ) -> Run[OutputT]:
        """Run the agent on ``input``; raise the hard error that ended it, after finalizing.

        ``deps`` reaches tools and hooks as ``ctx.deps``.
        """
        state = self._begin(input, deps, () if cancel is None else (cancel,), None)
        return await self._drive(state)

    def stream(
        self, input: str, *, deps: Any = None, cancel: CancelToken | None = None
    ) -> RunStream[OutputT]:
        """Run the agent and receive its events as they happen.

        ``async with agent.stream(input) as events: async for event in events: ...``. The last
        event is ``RunFinished``; a hard error is raised after it, as ``run()`` would raise it.
        Leaving the block early cancels the run (finalized as ``Cancelled``). Events are
        buffered without bound: the engine never waits for a slow consumer and no event is
        dropped.
        """
        if not isinstance(input, str):
            raise InvalidInput(f"stream() input must be a str, got {type(input).__name__}")
        return RunStream(self, input, deps, cancel)

    def _begin(
        self,
        input: str,
        deps: Any,
        cancels: tuple[CancelToken, ...],
        listener: Callable[[ev.Event], None] | None,
    ) -> RunState:
        """Start a run synchronously: checks, the ``Run`` record, the state, the listener."""
        if not isinstance(input, str):
            raise InvalidInput(f"run() input must be a str, got {type(input).__name__}")
        if self._active is not None:
            raise InvalidInput(
                "this Agent is already running; one Agent runs one conversation at a time "
                "(create an Agent per concurrent conversation)"
            )
        run: Run[Any] = Run(id=uuid.uuid4().hex, input=input, started_at=time.time())
        self._runs.append(run)
        transcript = list(self._history)
        base = len(transcript)
        transcript.append(Message.user(input))
        native = self._native()
        specs = self._specs(native)
        state = RunState(
            run=run,
            tokens=(self._cancel, *cancels),
            transcript=transcript,
            base=base,
            advertised=frozenset(s.name for s in specs),
            specs=specs,
            deps=deps,
        )
        state.events = ClientEventBridge(run, self._bus)
        state.native_output = native
        self._active = state
        self._bus.run = run
        self._bus.turn = 0
        if listener is not None:
            state.listener = listener
            self._bus.attach(listener)
        return state

    def _specs(self, native: bool) -> tuple[ToolSpec, ...]:
        """The tools advertised to the model: the registry's, and ``final_result`` if typed."""
        specs = self.registry.specs()
        if self.output is not None and not native and self.config.output_mode != "text":
            specs = (*specs, self.output.tool_spec)
        return specs

    async def _refresh_tools(self, state: RunState, *, starting: bool) -> None:
        """List tool sources that changed (MCP servers) and re-advertise the tools."""
        if await self._toolsets.refresh(starting=starting):
            state.specs = self._specs(state.native_output)
            state.advertised = frozenset(s.name for s in state.specs)

    def _native(self) -> bool:
        """Whether this run asks the provider for native structured output."""
        return (
            self.output is not None
            and self.config.output_mode == "native"
            and self.client.provider in _NATIVE_PROVIDERS
        )

    async def _drive(self, state: RunState) -> Run[OutputT]:
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

    async def _execute(self, state: RunState) -> Run[OutputT]:
        try:
            state.check_cancel()
            await self._refresh_tools(state, starting=True)
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
            system=self._system(),
            specs=state.specs,
            observers=self._bus,
            hooks=self._hooks,
        )
        guard.start(state.transcript)
        return guard

    def _system(self) -> str | None:
        """The system prompt; ``"text"`` output mode adds the answer's JSON schema to it."""
        if self.output is None or self.config.output_mode != "text" or self.output.is_text:
            return self.system
        extra = self.output.instructions()
        return extra if not self.system else f"{self.system}\n\n{extra}"

    async def _run_start(self, state: RunState) -> None:
        if self._bus.active:
            self._bus.emit(ev.RunStarted(state.run.id, 0, state.run))
        for hook in self._hooks:
            if overrides(hook, Hook, "on_run_start"):
                await hook.on_run_start(state.run)

    async def _loop(self, state: RunState, guard: ContextGuard) -> None:
        while True:
            state.check_cancel()
            if state.turn_index >= self.config.max_turns:
                raise MaxTurnsExceeded(self.config.max_turns)
            if self._toolsets.toolsets:
                await self._refresh_tools(state, starting=False)
            await guard.before_call(state, lambda messages: self._commit_compacted(state, messages))
            self.safety.budget_check(state.run)
            response = await self._model_step(state, guard)
            if response is None:
                continue
            turn = self._record(state, guard, response)
            if self.output is None:
                done = await self._text_turn(state, guard, turn, response)
            else:
                done = await self._typed_turn(state, guard, turn, response)
            state.complete_turn()
            if self._recorder is not None:
                self._recorder.turn_completed(state.run, state.audit)
            self.safety.budget_turn()
            if self._bus.active:
                self._bus.emit(ev.TurnFinished(state.run.id, turn))
            if done:
                return
            state.turn_index += 1

    async def _text_turn(
        self, state: RunState, guard: ContextGuard, turn: Turn, response: ModelResponse
    ) -> bool:
        """An untyped turn: dispatch the calls, or the reply is the output. True when done."""
        if not response.tool_calls:
            self._converge(state, response)
            state.run.output = response.text
            return True
        await self._dispatch(state, guard, turn, response.tool_calls)
        return False

    async def _typed_turn(
        self, state: RunState, guard: ContextGuard, turn: Turn, response: ModelResponse
    ) -> bool:
        """A typed turn: a valid answer ends the run; an invalid one is soft feedback."""
        assert self.output is not None
        calls = response.tool_calls
        finals = [c for c in calls if c.name == FINAL_RESULT and FINAL_RESULT in state.advertised]
        truncated = response.stop_reason in TRUNCATION_REASONS
        if finals:
            try:
                if truncated:
                    raise InvalidOutput(TRUNCATED_TEXT)
                value = self.output.from_arguments(finals[0].arguments)
            except InvalidOutput as invalid:
                self._invalid_output(state, invalid.text)
                await self._dispatch(state, guard, turn, calls, rejected=finals, why=invalid.text)
                return False
            results = [
                ToolResultPart(c.id, c.name, ACCEPTED_TEXT if c is finals[0] else NOT_EXECUTED_TEXT)
                for c in calls
            ]
            turn.tool_results = results
            self._append(state, guard, Message.tool_results(results))
            state.run.output = value
            return True
        if calls:
            await self._dispatch(state, guard, turn, calls)
            return False
        try:
            if FINAL_RESULT in state.advertised:
                raise InvalidOutput(CALL_FINAL_RESULT_TEXT)
            if truncated:
                raise InvalidOutput(TRUNCATED_TEXT)
            state.run.output = self.output.from_text(response.text)
        except InvalidOutput as invalid:
            self._invalid_output(state, invalid.text)
            self._append(state, guard, Message.user(invalid.text))
            return False
        return True

    def _invalid_output(self, state: RunState, text: str) -> None:
        """Count an invalid answer; past ``output_retries`` more tries the run ends."""
        state.invalid_outputs += 1
        if state.invalid_outputs > self.config.output_retries:
            raise OutputValidationFailed(state.invalid_outputs, text)

    async def _dispatch(
        self,
        state: RunState,
        guard: ContextGuard,
        turn: Turn,
        calls: Sequence[ToolCallPart],
        *,
        rejected: Sequence[ToolCallPart] = (),
        why: str = "",
    ) -> None:
        """Run the turn's tool calls; ``rejected`` calls get ``why`` as their soft result."""
        if not rejected:
            results = await self._dispatcher.dispatch_turn(state, calls)
            turn.tool_results = results
            self._append(state, guard, Message.tool_results(results))
            return
        skip = {c.id for c in rejected}
        runnable = [c for c in calls if c.id not in skip]
        done = await self._dispatcher.dispatch_turn(state, runnable) if runnable else []
        if rejected:
            by_id = {r.call_id: r for r in done}
            results = [
                by_id[c.id] if c.id in by_id else ToolResultPart(c.id, c.name, why, True)
                for c in calls
            ]
        else:
            results = done
        turn.tool_results = results
        self._append(state, guard, Message.tool_results(results))

    async def _model_step(self, state: RunState, guard: ContextGuard) -> ModelResponse | None:
        """One model call; None when a context rejection sends the turn back for compaction."""
        bus = self._bus
        bus.turn = state.turn_index
        if bus.active:
            client = self.client
            bus.emit(
                ev.TurnStarted(
                    state.run.id, state.turn_index, model=client.model, provider=client.provider
                )
            )
        request = build_request(
            state,
            self._system(),
            self.config.model_settings,
            self.output.spec if state.native_output and self.output is not None else None,
            self.session_id,
        )
        try:
            response = await call_model(self.client, request, state, bus, self.config.stream)
        except ContextLengthExceeded as error:
            guard.salvage(state, error)
            return None
        self.safety.budget_usage(response.usage, response.model or self.client.model)
        if bus.active:
            bus.emit(ev.ModelResponded(state.run.id, state.turn_index, response))
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
        if error is not None:
            run.output = None
        run.messages = list(state.audit) if error is None else close_interrupted(state.audit)
        self._commit(state, error)
        if self._recorder is not None:
            self.persistence_error = self._recorder.finished(run, self._history)
        self.safety.end_run()
        if error is not None and error.summary is None:
            error.summary = run.summary()
        await self._run_end_hooks(run)
        bus = self._bus
        if bus.active:
            bus.emit(ev.RunFinished(run.id, state.turn_index, run))
        if state.listener is not None:
            bus.detach(state.listener)
        if self._cancel.cancelled:
            self._cancel.reset()

    async def _run_end_hooks(self, run: Run[Any]) -> None:
        for hook in self._hooks:
            if overrides(hook, Hook, "on_run_end"):
                try:
                    await hook.on_run_end(run)
                except Exception:
                    logger.exception("hook %r raised in on_run_end; ignored", hook)

    def _commit(self, state: RunState, error: AgentLoopError | None) -> None:
        """Three-way retention: all on success, nothing for cannot-fit, else completed turns."""
        if error is None:
            self._history.extend(state.pending)
        elif isinstance(error, _CANNOT_FIT):
            state.run.unfinished_input = state.run.input
        else:
            self._history.extend(state.transcript[state.base : state.boundary])


def _shut(runner: asyncio.Runner, client: ModelClient, toolsets: Toolsets) -> None:
    """Stop tool servers and close ``client`` on ``run_sync``'s private loop, then the loop.

    Runs at ``close()``, garbage collection or interpreter exit. When another loop runs in this
    thread (the agent was collected inside async code), the private loop cannot run here, so it
    is shut from a short-lived thread.
    """
    if asyncio.events._get_running_loop() is not None:
        worker = threading.Thread(
            target=_shut, args=(runner, client, toolsets), name="agentloop-close"
        )
        worker.start()
        worker.join()
        return
    for close in (toolsets.aclose, client.aclose):
        for _ in range(3):  # a KeyboardInterrupt left pending in the loop surfaces here, once
            try:
                runner.run(close())
                break
            except BaseException:
                logger.debug("closing on run_sync's loop failed", exc_info=True)
    try:
        runner.close()
    except BaseException:
        logger.debug("closing run_sync's event loop failed", exc_info=True)


def _checked_setup(client: object, config: object, approver: object) -> RunConfig:
    """The run config, once the client, config and approver are known to be usable."""
    if client is None or not callable(getattr(client, "complete", None)):
        raise ConfigurationError("Agent needs a model client (a ModelClient)", field="client")
    config = RunConfig() if config is None else config
    if not isinstance(config, RunConfig):
        raise ConfigurationError("Agent config must be a RunConfig", field="config")
    if not config.headless and approver is None:
        raise ConfigurationError(
            "RunConfig(headless=False) needs Agent(approver=...) to answer Ask", field="approver"
        )
    if approver is not None and not callable(approver):
        raise ConfigurationError(
            f"Agent approver must be callable (call, message) -> bool, got {approver!r}",
            field="approver",
        )
    return config


def _output_type(output_type: type[Any] | None, registry: ToolRegistry) -> OutputType[Any] | None:
    if output_type is None:
        return None
    if FINAL_RESULT in registry:
        raise ConfigurationError(
            f"a tool is named '{FINAL_RESULT}', the name typed output answers with; rename it",
            field="tools",
        )
    return OutputType(output_type)


def _registry(tools: object) -> tuple[ToolRegistry, list[Toolset]]:
    """The agent's registry and tool sources; a single tool or a string is a clear error."""
    if isinstance(tools, ToolRegistry):
        return tools, []
    if isinstance(tools, str | bytes | Tool) or callable(tools) or _is_toolset(tools):
        raise ConfigurationError(
            f"Agent tools must be a list of tools, got {tools!r}; write tools=[...]",
            field="tools",
        )
    if not isinstance(tools, Iterable):
        raise ConfigurationError(
            f"Agent tools must be a list of tools, got {type(tools).__name__}", field="tools"
        )
    items = list(tools)
    sources = [t for t in items if _is_toolset(t)]
    return ToolRegistry(t for t in items if not _is_toolset(t)), sources


def _is_toolset(item: object) -> TypeGuard[Toolset]:
    """Whether ``item`` is a ``Toolset``, judged by its ``list_tools``.

    An ``isinstance`` on the runtime-checkable protocol costs ~14 us in Python 3.11, paid per
    tool per ``Agent``.
    """
    return not isinstance(item, Tool) and callable(getattr(item, "list_tools", None))


def _checked_history(history: object) -> list[Message]:
    """``Agent(history=...)`` as a list, checked as a transcript (``TranscriptError`` names it)."""
    if history is None:
        return []
    if isinstance(history, str | bytes | Message) or not isinstance(history, Iterable):
        raise TranscriptError(
            f"Agent history must be a sequence of Message, got {type(history).__name__}"
        )
    messages = list(history)
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TranscriptError(
                f"history[{index}] is a {type(message).__name__}, not a Message", index=index
            )
    if messages:
        validate_transcript(messages)
    return messages


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
    error = InternalError(
        f"unexpected {type(exc).__name__} in the engine: {redact_secrets(str(exc))}"
    )
    error.__cause__ = exc
    return error
