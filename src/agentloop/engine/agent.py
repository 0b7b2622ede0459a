"""``Agent``: what an application holds: a model client, tools, a prompt and the history.

``run``/``run_sync``/``stream`` start a run; its steps are ``agentloop.engine.loop.RunLoop`` (check
cancel → limits → compaction → model call → record → answer or dispatch tools, until an answer →
finalize) over one ``agentloop.engine.state.RunState``. With a ``store``, every commit point (run
start, each turn, the compaction commit, finalize) is also written there (``agentloop.store``);
``Agent.resume`` rebuilds an agent from it. With an ``output_type`` the final answer is validated
(``agentloop.engine.output``); all the run reports travels as one stream (``agentloop.events``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack, cast, overload

from agentloop._util.aio import AsyncClosing, Closing
from agentloop._util.peers import hinting
from agentloop.cancel import CancelToken
from agentloop.clock import SYSTEM_CLOCK, Clock
from agentloop.config import RunConfig, resolve_client
from agentloop.engine import peers
from agentloop.engine import setup as _setup
from agentloop.engine.agent_options import AgentOptions
from agentloop.engine.definition import Definition
from agentloop.engine.habits import Habits
from agentloop.engine.instructions import Instructions, checked_system
from agentloop.engine.live import LiveSessions
from agentloop.engine.provider_tools import agent_provider_tools, split_tools
from agentloop.engine.toolsets import Toolsets
from agentloop.errors import ConfigurationError, InvalidInput, MemoryBackendError
from agentloop.messages import Message, UserInput
from agentloop.model import ModelClient, ModelSettings
from agentloop.pausing import Decision
from agentloop.run import OutputT, Run
from agentloop.safety.breaker import ToolBreakers
from agentloop.safety.budget import Budget
from agentloop.tools import Tool, ToolRegistry, Toolset

if TYPE_CHECKING:  # the guardrails load only for an agent that has some, a run's rooms at a run
    from agentloop.engine.dispatch import Dispatcher
    from agentloop.engine.guards import SafetyState
    from agentloop.engine.session import Session
    from agentloop.engine.state import PerRun
    from agentloop.engine.stream import RunStream
    from agentloop.fleet import RateGovernor
    from agentloop.guardrails import Guardrail
    from agentloop.hooks import Approver, Hook
    from agentloop.memory import Memory
    from agentloop.observers import Observer
    from agentloop.provider_tools import ProviderTool
    from agentloop.store import Store  # the store, only for an agent given one
    from agentloop.toolsets import AbstractToolset

__all__ = ["Agent"]

logger = logging.getLogger("agentloop")


class Agent(Definition[OutputT], Habits, AsyncClosing, Closing):
    """An LLM agent: a model client, tools, a system prompt and the committed history.

    ``Agent(client)`` answers with text; ``Agent(client, output_type=Invoice)`` with a validated
    ``Invoice``. ``client``: any ``ModelClient`` or a ``"provider:model"`` string (built as
    ``build_client(Settings(provider, model))`` builds it); ``instructions=`` is ``system=``,
    text or a function of the run's context (``agentloop.engine.instructions``); ``memory=``
    long-term memory (``agentloop.memory``).
    """

    @overload
    def __init__(
        self: Agent[str | None],
        client: ModelClient | str,
        *,
        output_type: None = None,
        tools: Iterable[Tool | Toolset | ProviderTool | Callable[..., Any]] | ToolRegistry = (),
        system: Instructions | None = None,
        instructions: Instructions | None = None,
        config: RunConfig | None = None,
        hooks: Sequence[Hook] = (),
        observers: Sequence[Observer] = (),
        approver: Approver | None = None,
        guardrails: Sequence[Guardrail] = (),
        store: Store | None = None,
        session_id: str | None = None,
        history: Sequence[Message] | None = None,
        memory: Memory | None = None,
        toolsets: Sequence[AbstractToolset] = (),
        clock: Clock = SYSTEM_CLOCK,
        provider_tools: Sequence[ProviderTool] = (),
        name: str | None = None,
        handoffs: Sequence[Any] = (),
        governor: RateGovernor | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[OutputT],
        client: ModelClient | str,
        *,
        output_type: type[OutputT],
        tools: Iterable[Tool | Toolset | ProviderTool | Callable[..., Any]] | ToolRegistry = (),
        system: Instructions | None = None,
        instructions: Instructions | None = None,
        config: RunConfig | None = None,
        hooks: Sequence[Hook] = (),
        observers: Sequence[Observer] = (),
        approver: Approver | None = None,
        guardrails: Sequence[Guardrail] = (),
        store: Store | None = None,
        session_id: str | None = None,
        history: Sequence[Message] | None = None,
        memory: Memory | None = None,
        toolsets: Sequence[AbstractToolset] = (),
        clock: Clock = SYSTEM_CLOCK,
        provider_tools: Sequence[ProviderTool] = (),
        name: str | None = None,
        handoffs: Sequence[Any] = (),
        governor: RateGovernor | None = None,
    ) -> None: ...

    @hinting(peers.AGENT)
    def __init__(
        self,
        client: ModelClient | str,
        *,
        output_type: type[Any] | None = None,
        tools: Iterable[Tool | Toolset | ProviderTool | Callable[..., Any]] | ToolRegistry = (),
        system: Instructions | None = None,
        instructions: Instructions | None = None,
        config: RunConfig | None = None,
        hooks: Sequence[Hook] = (),
        observers: Sequence[Observer] = (),
        approver: Approver | None = None,
        guardrails: Sequence[Guardrail] = (),
        store: Store | None = None,
        session_id: str | None = None,
        history: Sequence[Message] | None = None,
        memory: Memory | None = None,
        toolsets: Sequence[AbstractToolset] = (),
        clock: Clock = SYSTEM_CLOCK,
        provider_tools: Sequence[ProviderTool] = (),
        name: str | None = None,
        handoffs: Sequence[Any] = (),
        governor: RateGovernor | None = None,
    ) -> None:
        config = _setup.governed_config(_setup.checked_setup(client, config, approver), governor)
        self.client = _setup.governed_client(resolve_client(client), governor, config)
        self.governor = governor  # SPEC 25: every request of the client waits for it
        self.clock, self._approver = clock, approver
        tools, inside = split_tools(tools)
        self.registry, sources = _setup.registry(tools)
        _setup.with_memory(self, memory)  # the memory tools join the registry (SPEC 27)
        self._toolsets = Toolsets(sources, self.registry, toolsets)
        self.system, self._prompt = checked_system(system, instructions)
        self.config = config
        self.output = _setup.output_type(output_type, self.registry)
        self._provider_tools = agent_provider_tools(provider_tools, inside, self)
        self.store = store
        self.breakers = ToolBreakers(config.tool_breaker, clock.monotonic)
        self._hooks, self._observers = _setup.hooks(hooks), _setup.observers(observers)
        self.name, self._handoffs = name, _setup.handoffs(self, handoffs)  # SPEC 26
        self._guardrails = _setup.guardrails_of(guardrails)  # loads only for an agent with some
        _setup.batch_checked(self)  # SPEC 25: a batch agent's client, stream and handoffs
        self._runner = self._closer = self._sync_thread = None
        # the live sessions by id, made on the first agent.session() (else no map at all)
        self._sessions: LiveSessions[Session[OutputT]] | None = None
        self._default_id = _setup.checked_session_id(session_id, new=clock.new_id)
        self._default_session: Session[OutputT] | None = None
        if store is not None or history is not None:  # checked (and recorded) at construction
            sid, new = self._default_id, session_id is not None
            self._default = _setup.new_session(self, sid, store, history, new=new)

    @property
    def _default(self) -> Session[OutputT]:  # made on first use: no run machinery loaded before
        if self._default_session is None:
            self._default_session = _setup.new_session(self, self._default_id)
        return self._default_session

    @_default.setter
    def _default(self, session: Session[OutputT]) -> None:
        self._default_session, self._default_id = session, session.id

    def _adopt(self, session: Session[OutputT]) -> Session[OutputT]:
        if self._sessions is None:
            self._sessions = LiveSessions()
        self._sessions.add(session.id, session)
        return session

    def _live(self, session_id: str) -> Session[OutputT] | None:
        if session_id == self._default_id:
            return self._default
        return None if self._sessions is None else self._sessions.get(session_id)

    @classmethod
    def resume(
        cls,
        session_id: str,
        *,
        store: Store,
        client: ModelClient | str,
        **agent_kwargs: Unpack[AgentOptions],
    ) -> Agent[str | None]:
        """Rebuild the agent of a stored session: its history and runs (failed ones included).

        A shorthand for ``Agent(client, store=store, ...)`` whose default session is
        ``agent.session(session_id)``, restored with the safety state the agent shares too (tool
        breakers, model health). A run the process never finalized is closed as a salvaging
        finalize would have closed it (see ``agentloop.store``). An unknown session gives an
        agent with no history.
        """
        agent = Agent(client, **agent_kwargs)
        agent.store = _setup.checked_store(store)
        agent._default = agent._restored(session_id, agent.store, shared=True)
        return agent

    @hinting(peers.SESSION)
    def session(
        self,
        session_id: str | None = None,
        *,
        store: Store | None = None,
        history: Sequence[Message] | None = None,
    ) -> Session[OutputT]:
        """A conversation on this agent: its own history and runs, the agent's tools and client.

        ``store`` defaults to the agent's. A ``session_id`` the store holds is restored
        (history, runs, safety state; the agent's shared tool breakers and model health are left
        as they are); a new id starts empty, or from ``history`` (checked as a transcript). The
        same id gives the same live ``Session`` object while it is referenced; without a store a
        session lives as long as the application holds it.

        Raises:
            InvalidInput: ``history`` for a session that exists, or an id no store can keep.
        """
        store = self.store if store is None else _setup.checked_store(store)
        if session_id is not None:
            live = self._live(_setup.checked_session_id(session_id))  # the id, once checked
            stored = live is None and store is not None and store.has_session(session_id)
            if (live is not None or stored) and history is not None:
                raise InvalidInput(
                    f"session {session_id!r} already exists; history= only seeds a new session"
                )
            if live is not None:
                return live
            if stored:
                assert store is not None
                return self._adopt(self._restored(session_id, store, shared=False))
        sid = session_id or self.clock.new_id()
        return type(self)._adopt(self, _setup.new_session(self, sid, store, history))  # no hook

    def _restored(self, session_id: str, store: Store, *, shared: bool) -> Session[OutputT]:
        """A session rebuilt from ``store`` (``shared``: the agent's breakers and health too)."""
        return _setup.restored(self, session_id, store, shared=shared)

    def _fresh(self, history: Sequence[Message] | None = None) -> Session[OutputT]:
        """An unsaved session for one stateless run (``history=``) or one child call."""
        return _setup.new_session(self, self.clock.new_id(), None, history)

    def _stateless(self, history: Sequence[Message]) -> Session[OutputT]:
        """A stateless run's session: the agent keeps it while a run of it is paused (SPEC 20)."""
        from agentloop.engine.stateless import kept_while_paused

        return cast("Session[OutputT]", kept_while_paused(self, self._fresh(history)))

    @property
    def default_session(self) -> Session[OutputT]:
        """The session ``run()``, ``history`` and ``runs`` act on."""
        return self._default

    @property
    def session_id(self) -> str:
        """The default session's id."""
        return self._default_id

    @property
    def history(self) -> list[Message]:
        """The default session's committed messages (a copy)."""
        return self._default.history

    @property
    def runs(self) -> list[Run[OutputT]]:
        """The default session's runs, failed ones included."""
        return self._default.runs

    @property
    def current_run(self) -> Run[OutputT] | None:
        """The default session's last run."""
        return self._default.current_run

    @property
    def persistence_error(self) -> MemoryBackendError | None:
        """The default session's last store failure (None when the last write landed)."""
        return self._default.persistence_error

    @property
    def safety(self) -> SafetyState:
        """The default session's safety state (its ``breakers`` are the agent's, shared)."""
        return self._default.safety

    @property
    def _dispatcher(self) -> Dispatcher:
        return self._default._dispatcher

    @property
    def cancel_token(self) -> CancelToken:  # noqa: D102 (the default session's cancel signal)
        return self._default.cancel_token

    def cancel(self) -> None:
        """Cancel the default session's running (or else next) run."""
        self._default.cancel()

    @hinting(peers.AS_TOOL)
    def as_tool(self, *, name: str, description: str, timeout: float | None = None) -> Tool:
        """This agent as a tool of another agent: one parameter, ``input``, the child's prompt.

        Each call runs a fresh, unsaved session of this agent; its output (typed output as
        JSON) is the result, its hard error the parent's soft error
        ``agent '<name>' stopped: <ErrorClass>: <message>``. The child's client is its own
        (``Agent("openai:gpt-5-mini").as_tool(...)`` builds it once, for every call).
        ``timeout``: None, no tool timeout (the child's own ``RunConfig`` limits govern, not the
        parent's ``tool_timeout``); seconds, the tool's own timeout (``Tool '<name>' timed out``).
        """
        from agentloop.engine.agent_tool import AgentTool

        return AgentTool(
            self._fresh, name=name, description=description, agent=self, timeout=timeout
        )

    def fork(self) -> Agent[OutputT]:
        """A fresh agent with this one's definition (memory included): no history, runs, store.

        Its own safety state and breakers; observers and hooks shared (durable workflows).
        """
        return cast("Agent[OutputT]", _setup.fork(self))

    async def aclose(self) -> None:
        """Release the client's connections and stop tool sources (they restart on demand).

        The tool sources of every agent its handoffs reach stop too (they list at a handoff).
        """
        try:
            await self._toolsets.aclose()
            if self._handoffs:
                from agentloop.engine.handoffs import close_receivers

                await close_receivers(self)
        finally:
            await self.client.aclose()

    def close(self) -> None:
        """Sync ``aclose``: also shuts the private event loop ``run_sync`` keeps."""
        if self._close_runner():
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self.aclose())
            return
        raise InvalidInput("close() was called inside a running event loop; await aclose()")

    @hinting(peers.RUN)
    def run_sync(
        self,
        input: UserInput,
        *,
        deps: Any = None,
        cancel: CancelToken | None = None,
        history: Sequence[Message] | None = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        model_settings: ModelSettings | None = None,
        usage_limits: Budget | None = None,
    ) -> Run[OutputT]:
        """The one sync facade: ``run()`` on a private event loop this agent keeps.

        The loop lives as long as the agent (connections are reused), shut with the client by
        ``close()``, ``with agent:``, collection or exit; one thread at a time.
        """
        options: PerRun = {"model_settings": model_settings, "usage_limits": usage_limits}
        work = self.run(
            input, deps=deps, cancel=cancel, history=history, toolsets=toolsets, **options
        )
        return self._run_sync(work)

    @hinting(peers.RUN)
    async def run(
        self,
        input: UserInput,
        *,
        deps: Any = None,
        cancel: CancelToken | None = None,
        history: Sequence[Message] | None = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        model_settings: ModelSettings | None = None,
        usage_limits: Budget | None = None,
    ) -> Run[OutputT]:
        """Run the agent on ``input``; raise the hard error that ended it, after finalizing.

        On the default session; with ``history=``, once on a fresh unsaved session seeded with
        it (the stateless call: ``run.conversation`` is what to pass next time). ``deps``
        reaches tools and hooks as ``ctx.deps``. ``model_settings`` and ``usage_limits`` (a
        ``Budget``) replace the config's ``model_settings`` and ``budget`` for this run only;
        ``toolsets`` are added to the agent's for this run (``agentloop.toolsets``).
        """
        session = self._default if history is None else self._stateless(history)
        options: PerRun = {"model_settings": model_settings, "usage_limits": usage_limits}
        work = session.run(input, deps=deps, cancel=cancel, toolsets=toolsets, **options)
        del self, session  # a failed run's traceback keeps this frame (engine.frames)
        return await work

    @hinting(peers.RUN)
    def stream(
        self,
        input: UserInput,
        *,
        deps: Any = None,
        cancel: CancelToken | None = None,
        history: Sequence[Message] | None = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        model_settings: ModelSettings | None = None,
        usage_limits: Budget | None = None,
    ) -> RunStream[OutputT]:
        """Run the agent and receive its events as they happen.

        ``async with agent.stream(input) as events: async for event in events: ...``. The last
        event is ``RunFinished``; a hard error is raised after it, as ``run()`` would raise it.
        Leaving the block early cancels the run (finalized as ``Cancelled``). Events are
        buffered without bound (the engine never waits, no event is dropped); the keywords as
        for ``run()``.
        """
        if self.config.batch:  # SPEC 25: a batch turn's reply arrives whole, hours later
            raise ConfigurationError("stream() on a batch agent (RunConfig(batch=True)): use run()")
        session = self._default if history is None else self._stateless(history)
        options: PerRun = {"model_settings": model_settings, "usage_limits": usage_limits}
        return session.stream(input, deps=deps, cancel=cancel, toolsets=toolsets, **options)

    async def continue_run(
        self,
        *,
        decisions: Mapping[str, Decision] | None = None,
        deps: Any = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        cancel: CancelToken | None = None,
    ) -> Run[OutputT]:
        """Continue a paused run with ``decisions``, or the run a crash cut off; raise as ``run()``.

        A paused run (SPEC 17: ``run.paused``) is continued with one decision per pending call,
        keyed by call id: ``Approve()``, ``Edit(arguments)``, ``Deny(message)``,
        ``Answer(content)``. It is the same ``Run``; a decided call runs at most once. Without a
        paused run, the run a crash cut off is continued from its last completed turn: completed
        tool calls are never run again (a store's journal). ``deps``: a value or ``(run) -> deps``;
        ``toolsets``: the run's ``run(toolsets=...)``, passed again (another process, after
        ``Agent.resume``), offered by the continued run.

        Raises:
            InvalidInput: Decisions that do not answer the pending calls exactly, or approve a
                tool this agent lacks (nothing recorded); no paused run, or nothing to continue.
            MemoryBackendError: Another live process is running (or deciding) the session.
        """
        session = self._default
        return await session.continue_run(
            decisions=decisions, deps=deps, toolsets=toolsets, cancel=cancel
        )

    def continue_run_sync(
        self,
        *,
        decisions: Mapping[str, Decision] | None = None,
        deps: Any = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        cancel: CancelToken | None = None,
    ) -> Run[OutputT]:
        """``continue_run()`` on the private event loop ``run_sync`` keeps."""
        go_on = self._default.continue_run_sync
        return go_on(decisions=decisions, deps=deps, toolsets=toolsets, cancel=cancel)

    async def cancel_run(self) -> Run[OutputT]:
        """End the paused or waiting run (SPEC 17, 25) as ``Cancelled`` (else ``InvalidInput``)."""
        return await self._default.cancel_run()

    def cancel_run_sync(self) -> Run[OutputT]:
        """``cancel_run()`` on the private event loop ``run_sync`` keeps."""
        return self._default.cancel_run_sync()

    def continue_stream(
        self,
        *,
        decisions: Mapping[str, Decision] | None = None,
        deps: Any = None,
        toolsets: Sequence[AbstractToolset] | None = None,
        cancel: CancelToken | None = None,
    ) -> RunStream[OutputT]:
        """``continue_run()`` as a stream of the continued run's events.

        ``async with agent.continue_stream(decisions=...) as events`` yields them as
        ``stream()`` does (``RunStarted`` again first, ``RunFinished`` last).
        """
        go_on = self._default.continue_stream
        return go_on(decisions=decisions, deps=deps, toolsets=toolsets, cancel=cancel)
