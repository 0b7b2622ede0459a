"""``Agent``: what an application holds: a model client, tools, a prompt and the history.

``run``/``run_sync``/``stream`` start a run; its steps are ``agentloop.engine.loop.RunLoop`` (check
cancel → limits → compaction → model call → record → answer or dispatch tools, until an
answer → finalize) over one ``agentloop.engine.state.RunState``. With a ``store``, every commit
point (run start, each completed turn, the compaction commit, finalize) is also written there
(``agentloop.store``); ``Agent.resume`` rebuilds an agent from it. With an ``output_type`` the
final answer is validated (``agentloop.engine.output``); everything the run reports travels as one
event stream (``agentloop.events``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypedDict, Unpack, cast, overload

from agentloop import events as ev
from agentloop._util.aio import AsyncClosing, Closing
from agentloop.cancel import CancelToken
from agentloop.clock import SYSTEM_CLOCK, Clock
from agentloop.config import RunConfig
from agentloop.engine import setup as _setup
from agentloop.engine.compaction import ContextGuard
from agentloop.engine.dispatch import Dispatcher
from agentloop.engine.guards import SafetyState
from agentloop.engine.journal import Journal, JournaledTools, ReplayClient
from agentloop.engine.loop import RunLoop
from agentloop.engine.resume import reopen, restore_safety
from agentloop.engine.state import Offer, RunState
from agentloop.engine.stream import RunStream
from agentloop.engine.toolsets import Toolsets
from agentloop.engine.turn import ClientEventBridge
from agentloop.errors import InvalidInput, MemoryBackendError
from agentloop.hooks import Approver, Hook
from agentloop.messages import Message
from agentloop.model import ModelClient
from agentloop.observers import EventBus, Observer
from agentloop.run import OutputT, Run
from agentloop.store import Store
from agentloop.store._session import SessionRecorder, restore
from agentloop.tools import Tool, ToolRegistry, Toolset

__all__ = ["Agent"]

logger = logging.getLogger("agentloop")

_NATIVE_PROVIDERS = frozenset({"openai", "openrouter", "ollama", "gemini"})


class AgentOptions(TypedDict, total=False):
    """The keyword arguments ``Agent.resume`` passes on to ``Agent``."""

    tools: Iterable[Tool | Toolset | Callable[..., Any]] | ToolRegistry
    system: str | None
    config: RunConfig | None
    hooks: Sequence[Hook]
    observers: Sequence[Observer]
    approver: Approver | None


class Agent(AsyncClosing, Closing, Generic[OutputT]):
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
        clock: Clock = SYSTEM_CLOCK,
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
        clock: Clock = SYSTEM_CLOCK,
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
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        config = _setup.checked_setup(client, config, approver)
        self.client = client
        self.clock = clock
        self.registry, toolsets = _setup.registry(tools)
        self._toolsets = Toolsets(toolsets, self.registry)
        self.system = system
        self.config = config
        self.output = _setup.output_type(output_type, self.registry)
        self.session_id = session_id or clock.new_id()
        self.store = store
        self.persistence_error: MemoryBackendError | None = None
        self._recorder = _setup.recorder(store, self.session_id, existing_ok=session_id is None)
        self._hooks = tuple(hooks)
        self._observers = tuple(observers)
        self._bus = EventBus(self._observers)
        self._history: list[Message] = _setup.checked_history(history)
        self._runs: list[Run[OutputT]] = []
        self._cancel = CancelToken()
        self._active: RunState | None = None
        self._runner: asyncio.Runner | None = None
        self._closer: weakref.finalize[Any, Any] | None = None
        self.safety = SafetyState(config, self._bus, clock)
        self._dispatcher = Dispatcher(
            safety=self.safety,
            registry=self.registry,
            config=config,
            hooks=self._hooks,
            observers=self._bus,
            approver=approver,
            session_id=self.session_id,
            clock=clock,
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
        history, runs = restore(_setup.checked_store(store), session_id)
        agent.store = store
        agent._recorder = SessionRecorder(store, session_id, synced=len(history))
        agent._history = history
        agent._runs = runs
        agent._wire_recorder()
        restore_safety(agent, store, continuing=None)
        return agent

    async def continue_run(
        self, *, deps: Any = None, cancel: CancelToken | None = None
    ) -> Run[OutputT]:
        """Continue the run a crash cut off, from its last completed turn; raise as ``run()``.

        Completed tool calls are never executed again: the turn in flight gets its journaled
        model reply back, and each of its tool calls that had returned gets its journaled output
        (``agentloop.engine.journal``). Needs an agent with a store (``Agent.resume``).

        Raises:
            InvalidInput: The session has no run a crash cut off.
            MemoryBackendError: Another live process is running the session.
        """
        state = reopen(self, deps, () if cancel is None else (cancel,))
        assert self._journal is not None
        client = self.client
        self.client = ReplayClient(client, self._journal.reply, lambda: state.turn_index)
        try:
            return await self._drive(state)
        finally:
            self.client = client

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
        from agentloop.engine.agent_tool import AgentTool

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
            clock=self.clock,
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
        run: Run[Any] = Run(id=self.clock.new_id(), input=input, started_at=self.clock.time())
        self._runs.append(run)
        transcript = list(self._history)
        base = len(transcript)
        transcript.append(Message.user(input))
        state = self._new_state(run, transcript, base, deps, cancels)
        self._bus.turn = 0
        if listener is not None:
            state.listener = listener
            self._bus.attach(listener)
        return state

    def _new_state(
        self,
        run: Run[Any],
        transcript: list[Message],
        base: int,
        deps: Any,
        cancels: tuple[CancelToken, ...],
    ) -> RunState:
        """The state of a run over ``transcript`` (``base``: where its own messages start)."""
        guard = ContextGuard(
            self.config, system=self._system(), observers=self._bus, hooks=self._hooks
        )
        state = RunState(
            run=run,
            tokens=(self._cancel, *cancels),
            transcript=transcript,
            base=base,
            offer=self._offer(),
            guard=guard,
            deps=deps,
        )
        state.events = ClientEventBridge(run, self._bus)
        self._active = state
        self._bus.run = run
        return state

    async def _drive(self, state: RunState) -> Run[OutputT]:
        return await RunLoop(self, state).drive()

    def _offer(self) -> Offer:
        """The tools advertised to the model: the registry's, and ``final_result`` if typed.

        With native structured output (an ``output_type``, ``output_mode="native"`` and a
        provider that has it) the answer's schema goes in the request instead.
        """
        output = self.output
        native = (
            output is not None
            and self.config.output_mode == "native"
            and self.client.provider in _NATIVE_PROVIDERS
        )
        specs = self.registry.specs()
        if output is not None and not native and self.config.output_mode != "text":
            specs = (*specs, output.tool_spec)
        return Offer(specs, native)

    async def _refresh_tools(self, state: RunState, *, starting: bool) -> None:
        """List tool sources that changed (MCP servers) and re-advertise the tools."""
        if await self._toolsets.refresh(starting=starting):
            state.offer = self._offer()

    def _system(self) -> str | None:
        """The system prompt; ``"text"`` output mode adds the answer's JSON schema to it."""
        output = self.output
        if output is None or self.config.output_mode != "text" or output.is_text:
            return self.system
        extra = output.instructions()
        return extra if not self.system else f"{self.system}\n\n{extra}"


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
