"""A conversation's state: what one session owns (SPEC 20).

A conversation owns its history, its runs, its tool dispatcher, which is its safety state too
(``SafetyState``: loop and convergence windows and the limits gate, over the agent's shared tool
breakers; the limits gate is its event channel: one object where there were three), its store
recorder and journal, its cancel signal and the run in flight. It reads everything
else from the agent's definition (``agentloop.engine.definition``). ``Session`` adds the ways to
run on it; the run loop, the stream and the resume step work on this state, below ``Session``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic

from agentloop._util.lazy import lazy_module
from agentloop._util.run_sink import RUN_SINK
from agentloop.cancel import CancelToken
from agentloop.engine.definition import Definition
from agentloop.engine.dispatch import Dispatcher
from agentloop.engine.no_history import own_history
from agentloop.engine.overrides import swap_of
from agentloop.engine.state import Measured, RunOptions, RunState, started_state
from agentloop.errors import ConfigurationError, InvalidInput, MemoryBackendError
from agentloop.messages import Message, TextPart, ToolChangePart, UserInput
from agentloop.model import ModelClient, is_append_only, media_provider
from agentloop.run import OutputT, Run, Turn, started_run
from agentloop.tokens import MEDIA_PROVIDER

if TYPE_CHECKING:  # the store loads only for a session given one, a run's rooms with a run
    from agentloop.engine.journal import Journal
    from agentloop.store._session import SessionRecorder

if TYPE_CHECKING:
    from agentloop import events as ev
else:  # the event classes load when somebody first listens
    ev = lazy_module("agentloop.events")

__all__ = ["Conversation"]


class Conversation(Generic[OutputT]):
    """The state of one conversation on an agent's definition."""

    _keeper: Callable[[Conversation[Any]], None] | None = None
    """A stateless session's: told at each run's end (``agentloop.engine.stateless``)."""

    def __init__(
        self,
        agent: Definition[OutputT],
        session_id: str,
        *,
        recorder: SessionRecorder | None,
        history: list[Message],
        runs: list[Run[OutputT]] | None = None,
    ) -> None:
        self.agent = agent
        self.id = session_id
        self.persistence_error: MemoryBackendError | None = None
        self._recorder = recorder
        self._history = history
        self._latest: Run[OutputT] | None = runs[-1] if runs else None
        """The session's last run (``current_run``), None before its first."""
        self._runs: list[Run[OutputT]] | None = runs if runs and len(runs) > 1 else None
        """Every run, made at the second: a session's first run holds no list across its
        model waits (one object less for the collector per run in flight). Its last item is
        ``_latest``; ``_every_run()`` reads it, ``_set_runs`` replaces it."""
        self._cancel: CancelToken | None = None
        """The session's own cancel signal, made when asked for (``engine.session_cancel``)."""
        self._active: RunState | None = None
        self._watcher: Any = None
        """The active run's loop once it drives (``RunLoop``): it watches a signal made then."""
        self._children: dict[str, Any] | None = None
        self._paused_options: dict[str, Any] | None = None
        """A paused run's own settings and budget (``run(model_settings=, usage_limits=)``)."""
        self._run_toolsets: dict[str, tuple[Any, ...]] = _NO_RUN_TOOLSETS  # replaced, never changed
        """``run(toolsets=...)``'s, by run id: its continuations here keep them (this process)."""
        """Paused child sessions (``as_tool``) by the parent's call id, while this process lives."""
        self._own: dict[str, Any] = agent.__dict__  # (``vars(agent)``: twice the time)
        """The agent's attributes (its own dict, so always current): a run reads them here at
        C speed, where each read of an ``Agent`` pays its ``__getattr__`` hook on 3.11 (about
        300 instructions more) and ``vars(agent)`` pays it too (about 1,000)."""
        own = self._own
        # its dispatcher is its safety state, its limits gate and its event channel (``bus``)
        self.safety = self._dispatcher = self._bus = Dispatcher(own, session_id)
        self._journal: Journal | None = None
        self._drop_block = bool(runs) and any(r.thinking_prefix_mismatch for r in runs or ())
        """A run asked for ``thinking_prefix_mismatch="drop_block"``: every later run sends it
        (a resumed session knows it from its stored runs)."""
        self._measured: Measured | None = None
        """What the last run that committed everything measured of the history (``Measured``)."""
        self._link: tuple[Any, ...] | None = None
        """The history's link at the last run's end, which ``run.conversation`` shares, and the
        list it was taken of (``agentloop.engine.kept``)."""
        self._linked: list[Message] | None = None
        if recorder is not None:  # (a call fewer for a session without a store)
            self._wire_recorder()

    def __repr__(self) -> str:
        return f"<Session {self.id!r}: {len(self._every_run())} runs>"

    def _wire_recorder(self) -> None:
        """With a durable store: safety state at each commit point, tool outputs journaled."""
        recorder = self._recorder
        if recorder is not None:
            self._dispatcher.store = recorder.store  # child agents' runs are recorded there too
        if recorder is None or recorder.durable is None:
            return
        recorder.snapshot = self._snapshot
        from agentloop.engine.journal import Journal, JournaledTools  # durable stores only

        self._journal = Journal(recorder.step)
        self._dispatcher.registry = JournaledTools(self.agent.registry, self._journal)
        self._dispatcher.journal = self._journal

    def _snapshot(self) -> dict[str, Any]:
        """The state a durable store keeps at each commit point: safety, and ``drop_block``.

        ``drop_block`` is there too (SPEC 28), so a session whose asking run crashed before its
        record was written still sends it after ``Agent.resume``.
        """
        data = self.safety.snapshot(self.agent.client)
        if self._drop_block:
            data["drop_block"] = True
        return data

    @property
    def session_id(self) -> str:
        """The session's id (``id``)."""
        return self.id

    @property
    def history(self) -> list[Message]:
        """Committed messages (a copy)."""
        return list(self._history)

    @property
    def runs(self) -> list[Run[OutputT]]:
        """Every run of this session, failed ones included."""
        return list(self._every_run())

    @property
    def current_run(self) -> Run[OutputT] | None:
        """The last run."""
        return self._latest

    @property
    def cancel_token(self) -> CancelToken:
        """The session's own cancel signal (made at the first ask; a running run watches it)."""
        token = self._cancel
        if token is None:  # made now (and joins a running run): a run never asked makes none
            from agentloop.engine.session_cancel import session_signal

            token = session_signal(self)
        return token

    def cancel(self) -> None:
        """Fire the session's cancel signal: the running (or else the next) run is cancelled."""
        self.cancel_token.cancel()

    def _tool_cancel(self, state: RunState) -> CancelToken:
        """A tool's ``ctx.cancel`` in ``state``'s run, at its first read (``ToolContext.cancel``).

        The run's last token: its own beside a caller's (fired with any of them, ``RunLoop``),
        else the session's, made now if nobody asked before (the run watches it at once).
        """
        tokens = state.tokens
        return tokens[-1] if tokens else self.cancel_token

    def _turn_done(self, state: RunState, turn: Turn) -> None:
        """A turn is complete: a salvage point, saved, counted, announced (``TurnFinished``)."""
        state.boundary = len(state.transcript)  # a salvage point (``complete_turn``, inline)
        turn.agent = self._bus.agent  # the run's ``last_agent`` (a ``Run`` read pays its hook)
        if self._recorder is not None:
            self._recorder.turn_completed(state.run, state.audit)
        self.safety.turn_done()
        if self._bus.active:
            self._bus.emit(ev.TurnFinished(state.run.id, turn))
        if state.handoff is not None:  # a handoff tool ran in this turn: the receiver rules
            from agentloop.engine.handoffs import take_over

            take_over(self, state)

    def _ready(self) -> list[Run[OutputT]] | None:
        """The runs a new run joins (None: none yet), if it may start (else ``InvalidInput``).

        A session another process (or agent) ran since this one's last commit is reloaded
        from its store first (``agentloop.engine.resume.refreshed``).
        """
        if self._active is not None:
            self._check_idle()  # says it is running
        if self._recorder is not None and not self._recorder.fresh():
            from agentloop.engine.refresh import refreshed  # another process ran it since

            refreshed(self)  # before the paused check: another process may have decided it
        last = self._latest
        if last is None:
            return None
        if last.waiting or last.pending:
            self._check_idle()  # says why the session cannot start a run
        runs = self._runs
        if runs is None:  # the second run: the list is made now
            runs = self._runs = [last]
        return runs

    def _begin(
        self,
        input: UserInput,
        deps: Any,
        cancels: tuple[CancelToken, ...],
        listener: Callable[[ev.Event], None] | None,
        *,
        stream: bool = False,
        options: RunOptions | None = None,
        into: RunState | None = None,
    ) -> RunState:
        """Start a run synchronously: checks, the ``Run`` record, the state, the listener.

        ``stream``: ask the provider for streamed replies (``stream()`` does); ``options``:
        this run's model settings and budget; ``into``: the loop to begin it on (None: new).
        """
        toolsets = None if options is None else self._own_toolsets(options)
        if type(input) is str:  # the common input: its message as ``from_input`` makes it
            message = Message("user", (TextPart(input),))
        else:
            message, input = _other_input(input)  # text and media parts
        runs = self._ready()
        clock = self._own["clock"]
        run = self._latest = started_run(clock.new_id(), input, clock.time(), self.id)
        if runs is not None:  # (None: the session's first run, the only one: no list)
            runs.append(run)
        if (sink := RUN_SINK.get()) is not None:  # agentloop.evals: the runs of a case
            sink.append(run)
        history = self._history
        transcript = [*history, message]
        known = self._measured
        if known is not None and not known.holds(history):
            known = self._measured = None
        if toolsets or self._run_toolsets:  # run(toolsets=...): this run's, kept to continue
            self._run_toolsets = {run.id: toolsets} if toolsets else _NO_RUN_TOOLSETS
        state = self._new_state(run, transcript, len(history), deps, cancels, known, into)
        self._bus.turn = 0
        state.stream = stream
        if options is not None:
            if options.model_settings is not None:
                state.settings = options.model_settings
            state.budget = options.usage_limits
        if self._drop_block or state.settings.thinking_prefix_mismatch:
            self._keep_drop_block(state)
        if listener is not None:
            state.listener = listener
            self._bus.attach(listener)
        return state

    def _own_toolsets(self, options: RunOptions | None) -> tuple[Any, ...] | None:
        """``run(toolsets=...)``'s; a batch agent refuses them (``poll`` continues elsewhere)."""
        toolsets = options.toolsets if options is not None else None
        if toolsets and self.agent.config.batch:
            raise ConfigurationError(
                "run(toolsets=...) on a batch agent: its turns continue in agentloop.batch.poll, "
                "which has the agent's own toolsets only; give them to the agent, "
                "Agent(..., toolsets=[...])",
                field="toolsets",
            )
        return tuple(toolsets) if toolsets else None

    @property
    def loaded_tools(self) -> frozenset[str]:
        """The deferred tools in effect for this conversation (SPEC 22): its runs' loads."""
        from agentloop.engine.offering import loaded_by

        loaded = {n for r in self._every_run() for n in r.loaded_tools}
        return frozenset(loaded.union(loaded_by(self._history)))

    def _plan(self, state: RunState, swap: Any, extra: tuple[Any, ...] = ()) -> None:
        """The run's per-call tool plan (toolsets, deferred tools), when it has any."""
        from agentloop.engine.offering import plan_for

        toolsets = swap.toolsets if swap is not None and swap.toolsets is not None else None
        sets = (*(self.agent._sets if toolsets is None else toolsets), *extra)
        plan = plan_for(self.agent, state.registry, sets, self.loaded_tools)
        if plan is not None:
            plan.emit = self._loaded
            view = self._dispatcher.registry
            plan.view = view if hasattr(view, "over") else None
        state.plan = plan

    def _loaded(self, names: list[str], via: str) -> None:
        bus = self._bus
        if bus.active and bus.run is not None:
            bus.emit(ev.ToolsLoaded(bus.run.id, bus.turn, tuple(names), via))

    def _append_only(self, state: RunState) -> None:
        """The run is on an append-only conversation (SPEC 28): its base and its compaction."""
        from agentloop.engine.appendonly import AppendOnly

        own_history(self)  # its base is written into the history at the run's start
        state.appendonly = AppendOnly()
        state.appendonly.attach(state, self.agent.config)

    def _keep_drop_block(self, state: RunState) -> None:
        """SPEC 28's ``drop_block``: on from the run that asks for it, for every later run."""
        if state.settings.thinking_prefix_mismatch:
            self._drop_block = True
        else:
            state.settings = replace(state.settings, thinking_prefix_mismatch="drop_block")
        state.run.thinking_prefix_mismatch = state.settings.thinking_prefix_mismatch

    def _batched(self, state: RunState) -> None:
        from agentloop.fleet._batch_client import BatchClient

        state.client = BatchClient(state.client, state, self._recorder)

    def _new_loop(self) -> RunState:
        """A new run's loop, which is its state (``Session``'s: ``engine.loop.RunLoop``).

        The loop's module imports this one: the session, a layer above, makes it.
        """
        raise NotImplementedError

    def _every_run(self) -> list[Run[OutputT]]:
        """Every run of the session, in order (the list itself once there are two)."""
        runs = self._runs
        if runs is not None:
            return runs
        return [] if self._latest is None else [self._latest]

    def _set_runs(self, runs: list[Run[OutputT]]) -> None:
        """The session's runs are ``runs`` now (a store's reload): ``_latest`` and ``_runs``."""
        self._latest = runs[-1] if runs else None
        self._runs = runs if len(runs) > 1 else None

    def _replace_run(self, run: Run[OutputT]) -> None:
        """``run`` takes the place of the session's run of the same id (a stored version)."""
        runs = self._runs
        if runs is not None:
            for i, r in enumerate(runs):
                if r.id == run.id:
                    runs[i] = run
        if self._latest is not None and self._latest.id == run.id:
            self._latest = run

    def _check_idle(self) -> None:
        """A new run needs a session that is neither running nor paused."""
        if self._active is not None:
            raise InvalidInput(
                f"session {self.id!r} is already running; one session runs one run at a time "
                "(give each concurrent conversation its own: agent.session())"
            )
        last = self._latest
        if last is not None and last.waiting is not None:
            raise InvalidInput(
                f"session {self.id!r} has a batch run ({last.id}) waiting on its "
                "provider batch: agentloop.batch.poll(agent) continues it when its result arrives "
                "(cancel_run() abandons it)"
            )
        if last is not None and last.pending:
            paused = last
            raise InvalidInput(
                f"session {self.id!r} has a paused run ({paused.id}) waiting on "
                f"{len(paused.pending)} pending call(s): answer them with "
                "continue_run(decisions={call_id: Approve() | Deny() | Edit(...) | Answer(...)}) "
                "before starting a new run, or abandon it with cancel_run()"
            )

    def _new_state(
        self,
        run: Run[Any],
        transcript: list[Message],
        base: int,
        deps: Any,
        cancels: tuple[CancelToken, ...],
        known: Measured | None = None,
        into: RunState | None = None,
    ) -> RunState:
        """A run's state, its loop (``into`` or new), on ``transcript`` (``known``: measured)."""
        agent, own = self.agent, self._own
        client: ModelClient = own["client"]
        swap = swap_of(agent)  # agent.override(): this run's client and tools instead
        registry = None
        if swap is not None:
            client = swap.client or client
            registry = swap.registry
        kind = type(agent)  # its methods read on the class: no ``__getattr__`` hook
        system = kind._system(agent)
        provider = media_provider(client)  # None: a fallback over several (the largest)
        if MEDIA_PROVIDER.get() != provider:  # a set makes a new context mapping: only if new
            MEDIA_PROVIDER.set(provider)  # media cost by its formula (the run's task's too)
        config, bus = own["config"], self._bus
        tokens = _run_tokens(self._cancel, cancels) if cancels or self._cancel else ()
        offer = kind._offer(agent, client, registry)
        state = started_state(  # RunState(...) with every field, no keywords to match
            run, tokens, transcript, base, offer, client, deps, system, config.model_settings,
            registry, known, self._new_loop() if into is None else into,  # the loop: the state
        )  # fmt: skip
        state.arm_guard(config, bus, own["_hooks"])  # the state is its context guard
        extra = self._run_toolsets.get(run.id, ()) if self._run_toolsets else ()  # run(toolsets=)
        if own["_toolsets"].sets or (registry or own["registry"]).deferring or swap or extra:
            self._plan(state, swap, extra)
        if _appends_only(agent, own, client, transcript):
            self._append_only(state)  # SPEC 28 (a base opens the history: append-only it stays)
        if config.batch:  # each model turn through the provider's batch API (SPEC 25)
            self._batched(state)
        self._active = state  # (its loop was made with this session: ``state.session``)
        bus.run = run
        bus.agent = None  # every run starts with the session's own agent
        return state


def _other_input(input: UserInput) -> tuple[Message, str | tuple[Any, ...]]:
    """A non-``str`` input's message (``InvalidInput`` says what fits), and what the run keeps.

    The run keeps a tuple of what was given (a ``str`` subclass stays as it is).
    """
    message = Message.from_input(input)
    return message, input if isinstance(input, str) else tuple(input)


def _run_tokens(
    mine: CancelToken | None, cancels: tuple[CancelToken, ...]
) -> tuple[CancelToken, ...]:
    """A run's cancel tokens: the session's once somebody asked for it (``engine.session_cancel``).

    With a caller's token, the tools' own (``ctx.cancel``: the last) shows every token's fire.
    """
    if cancels:
        return (*cancels, CancelToken()) if mine is None else (mine, *cancels, CancelToken())
    return () if mine is None else (mine,)


_NO_RUN_TOOLSETS: dict[str, tuple[Any, ...]] = {}
"""A session's ``run(toolsets=...)`` while it has none (never written to: sessions replace it)."""


def _appends_only(
    agent: Any, own: dict[str, Any], client: ModelClient, transcript: Sequence[Message]
) -> bool:
    """Whether a run is on an append-only conversation (SPEC 28).

    Its client may call an append-only model, its history opens with a base (a system message
    with a ``ToolChangePart``; any other system message is the application's own, SPEC 12), or
    an agent its handoffs reach calls such a model (SPEC 26).
    """
    first = transcript[0] if transcript else None  # its role read here: no call a plain run
    if is_append_only(client) or (first is not None and first.role == "system" and _base(first)):
        return True
    if not own.get("_handoffs"):  # (``own``: the agent's attributes)
        return False
    from agentloop.engine.handoffs import all_receivers

    return any(is_append_only(a.client) for a in all_receivers(agent))


def _base(system: Message) -> bool:
    """Whether a ``system`` message is an append-only conversation's base (``is_base``)."""
    return any(type(p) is ToolChangePart for p in system.parts)
