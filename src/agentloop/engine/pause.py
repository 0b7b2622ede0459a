"""A paused run (SPEC 17): how it is kept when it pauses, and how decisions continue it.

**Pausing.** When a turn's dispatch leaves calls pending, the run stops there and returns
normally. Finalize's paused case (``paused_record``): the completed turns commit; the paused
turn — its reply and the results of the calls that ran — goes into ``run.paused_turn`` with the
pending calls in ``run.pending``, uncommitted. The run record is stored so (status paused), so
another process can continue it after ``Agent.resume``.

**Continuing** (``reopen_paused``). The decisions are checked against the run's pending calls
(``check_decisions``: exactly one fitting decision per call, else ``InvalidInput`` and nothing
changes), then recorded with the run — in the store, before any decided call runs, while the
session's lease is held so a second process deciding the same run gets a clear error. The run's
state is rebuilt from the stored record alone (same code in the same process and in another):
the committed history, then the paused reply; the engine completes the paused turn
(``RunLoop._resume_paused``) and goes on as with any run. A decided call runs at most once: the
journal marks it started before it runs and keeps its result (``agentloop.engine.call``). After a
crash mid-continue, ``continue_run()`` without decisions finishes with the recorded ones.

**The tools and deps of a continuation** (``ready_to_continue``, awaited before the state is
built). Tool sources (MCP servers) are listed first, so the decisions are checked against the
tools the continuation will really have: an ``Approve`` or ``Edit`` for a call whose tool the
agent of its turn lacks is ``InvalidInput`` naming it (``check_agent_tools``, the one check
every face uses), before anything is recorded. Then ``deps`` given as a callable is called with
the run (``(run) -> deps``, its result awaited when it is awaitable), so an application's
factory builds the deps a decided tool reads.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentloop.cancel import CancelToken
from agentloop.engine.handoff_carry import turn_agent
from agentloop.engine.handoffs import paused_view, resume_in
from agentloop.engine.pause_tools import (
    agent_tools,
    check_memory,
    check_offered,
    check_own_tools,
    stored_child,
)
from agentloop.engine.replay_marks import mark_replays
from agentloop.engine.state import Paused
from agentloop.errors import InvalidInput
from agentloop.messages import Message, ToolResultPart
from agentloop.pausing import (
    Decision,
    PendingCall,
    check_decisions,
    check_tools,
    decision_from_dict,
)
from agentloop.run import Run, Turn

if TYPE_CHECKING:
    from agentloop.engine.conversation import Conversation
    from agentloop.engine.state import RunState

__all__ = [
    "Resuming",
    "agent_tools",
    "check_agent_tools",
    "check_continuable",
    "complete_paused_turn",
    "paused_record",
    "ready_to_continue",
    "reopen_paused",
]


@dataclass(slots=True)
class Resuming:
    """What the loop needs to complete a paused turn: the turn, what ran, the decisions."""

    turn: Turn
    results: dict[str, ToolResultPart]
    decisions: Mapping[str, Decision]
    children: Mapping[str, Any]
    """Paused child agents by the parent's call id: ``{"session_id", "ids"}``."""
    system: str | None = None
    """The instructions the run was paused with (SPEC 17: reused, never computed again)."""


def paused_record(
    session: Conversation[Any],
    state: RunState,
    pending: tuple[PendingCall, ...],
    budget: Mapping[str, Any] | None,
) -> None:
    """Finalize's paused case on the run record: the paused turn kept beside its pending calls.

    A paused child agent's session is kept by the session in memory, and named in the record
    (its runs are in the store when the parent has one, so another process can continue it).
    """
    run = state.run
    turn = run.turns.pop()
    turn.agent = run.last_agent
    reply = state.audit[-1]
    children = {
        call_id: {"session_id": entry[1].id, "ids": [p.id for p in entry[2]]}
        for call_id, entry in (state.children or {}).items()
        if entry[0] == "paused"
    }
    if children:
        session._children = {k: e[1] for k, e in (state.children or {}).items() if e[0] == "paused"}
    options = _options_record(session, state)
    run.paused_turn = {
        "options": options,
        "children": children,
        "turn": turn.to_dict(),
        "message": reply.to_dict(),
        "results": Message.tool_results(turn.tool_results).to_dict() if turn.tool_results else None,
        "budget": dict(budget) if budget is not None else None,
        **(paused_view(state) if run.last_agent else _instructions(state)),  # a receiver paused
    }
    run.pending = pending
    run.messages = list(state.audit[:-1])


def reopen_paused(
    session: Conversation[Any],
    run: Run[Any],
    decisions: object,
    deps: Any,
    cancels: tuple[CancelToken, ...],
) -> RunState:
    """The paused run's state with its decisions recorded, ready for the loop to continue."""
    if session._active is not None:
        raise InvalidInput(f"session {session.id!r} is already running")
    recorder = session._recorder
    durable = recorder.durable if recorder is not None else None
    if durable is not None:
        assert recorder is not None
        recorder.claim()  # one process decides: another live one gets MemoryBackendError
    try:
        if durable is not None:  # what the store says now, not what this process read before
            stored = durable.load_run(run.id)
            if stored is not None:
                run = _adopted(session, run, stored.run)
        if run.pending:
            check_memory(session.agent, run, _child_run(session))  # its writes kept (27)
        agent = turn_agent(session.agent, run.last_agent)  # a receiver gone: no tools (26)
        checked = _decisions(agent, run, decisions, session._run_toolsets.get(run.id, ()))
        at = session.agent.clock.time()
        if not _recorded(run):
            run.decisions.append(
                {"at": at, "decisions": {k: d.to_dict() for k, d in checked.items()}}
            )
            if recorder is not None:
                recorder.decided(run, session._history)  # before any decided call runs
        return _state(session, run, checked, deps, cancels)
    except BaseException:
        if recorder is not None and durable is not None:
            recorder.release()
        raise


def _child_run(session: Conversation[Any]) -> Callable[[str, str], Any]:
    """The paused run of the child agent a paused call ran (live, else stored), or None."""
    store = session._recorder.store if session._recorder is not None else None
    return stored_child(store, session._children)


def _adopted(session: Conversation[Any], mine: Run[Any], stored: Run[Any]) -> Run[Any]:
    """The stored version of the run, replacing this process's copy in the session."""
    if mine.to_dict() == stored.to_dict():
        return mine
    stored.session_id = session.id
    session._replace_run(stored)
    return stored


def _recorded(run: Run[Any]) -> bool:
    """Whether the run's last decision set answers its pending calls (a crashed continue)."""
    if not run.decisions:
        return False
    last = run.decisions[-1].get("decisions", {})
    return all(p.id in last for p in run.pending)


def _decisions(
    agent: Any, run: Run[Any], decisions: object, own: tuple[Any, ...] = ()
) -> dict[str, Decision]:
    """The decisions to apply: the given ones (checked), or those recorded before a crash.

    ``own``: the run's own toolsets (``run(toolsets=...)``, kept by its session, or
    ``continue_run(toolsets=...)``): their static tool names count as the agent's; one whose
    tools are known only per call (listed, dynamic) leaves the continued run to judge, as for an
    agent's toolsets.
    """
    if not run.pending:
        raise InvalidInput(
            f"run {run.id} is not paused: continue_run(decisions=...) answers a paused run's "
            "pending calls (run.pending)"
        )
    if _recorded(run):
        if decisions is not None:
            raise InvalidInput(
                f"the pending calls of run {run.id} are already decided (decisions recorded "
                "at the continue a crash cut off); call continue_run() without decisions to "
                "finish with the recorded ones"
            )
        recorded = run.decisions[-1]["decisions"]
        again = {p.id: decision_from_dict(recorded[p.id]) for p in run.pending}
        check_own_tools(agent, run.pending, again, own)  # recorded, but not spent on nothing
        return again
    if decisions is None:
        ids = ", ".join(repr(p.id) for p in run.pending)
        raise InvalidInput(
            f"run {run.id} is paused on {len(run.pending)} pending call(s) ({ids}): pass "
            "continue_run(decisions={call_id: Approve() | Deny() | Edit(...) | Answer(...)})"
        )
    checked = check_decisions(run.pending, decisions)
    check_own_tools(agent, run.pending, checked, own)
    return checked


def check_agent_tools(
    agent: Any, pending: tuple[PendingCall, ...], decisions: Mapping[str, Decision]
) -> None:
    """``InvalidInput`` naming the tool when ``agent`` cannot run an approved call (SPEC 17)."""
    check_tools(pending, decisions, agent_tools(agent))


async def check_continuable(
    agent: Any,
    pending: tuple[PendingCall, ...],
    decisions: Mapping[str, Decision],
    last_agent: str | None = None,
) -> None:
    """A face's check before it continues: tool sources listed, then ``check_agent_tools``.

    ``last_agent``: the run's (``run.last_agent``): a handoff receiver's call is judged by it.
    """
    agent = turn_agent(agent, last_agent)
    await _list_tools(agent)
    check_agent_tools(agent, pending, decisions)


async def _list_tools(agent: Any) -> None:
    """List the agent's tool sources (MCP servers): the tools a continuation will really have."""
    if agent._toolsets.toolsets:
        await agent._toolsets.refresh(starting=True)


async def ready_to_continue(
    session: Any, decisions: object, deps: Any, toolsets: tuple[Any, ...] = ()
) -> Any:
    """Before continuing ``session`` (a ``Session``): tools listed, decisions checked, deps made.

    Raises ``InvalidInput`` (nothing recorded) as ``reopen_paused`` would, before a deps
    factory is called; returns the deps to run with (a callable's result, awaited if need be).
    ``toolsets``: ``continue_run(toolsets=...)``, judged per call as the run's own toolsets are.
    """
    last = session._latest
    if last is None:
        return deps
    agent = turn_agent(session.agent, last.last_agent)  # the agent of the paused turn
    checked: dict[str, Decision] = {}
    own: tuple[Any, ...] = ()
    if last.pending:
        check_memory(session.agent, last, _child_run(session))
        await _list_tools(agent)
        if decisions is not None:
            if _recorded(last):  # decided elsewhere: reopen_paused says so (the lease first)
                return deps
            own = toolsets or session._run_toolsets.get(last.id, ())
            checked = _decisions(agent, last, decisions, own)
    if callable(deps):
        deps = deps(last)
        if inspect.isawaitable(deps):
            deps = await deps
    if checked:  # the toolsets as the continuation resolves them: never spent on nothing
        await check_offered(agent, last, checked, deps, own)
    return deps


def _state(
    session: Conversation[Any],
    run: Run[Any],
    decisions: dict[str, Decision],
    deps: Any,
    cancels: tuple[CancelToken, ...],
) -> RunState:
    paused = run.paused_turn or {}
    try:
        turn = Turn.from_dict(paused["turn"])
        reply = Message.from_dict(paused["message"])
        ran = paused.get("results")
        results = [] if ran is None else list(Message.from_dict(ran).tool_results_parts)
    except (KeyError, TypeError, ValueError, InvalidInput) as exc:
        raise InvalidInput(f"run {run.id}: its paused turn is unreadable: {exc}") from exc
    history = session._history
    transcript = [*history, reply]
    limits = session.safety
    limits.continue_run(run, paused.get("budget"))
    audit = [*run.messages, reply]
    run.turns.append(turn)
    run.pending, run.paused_turn = (), None
    run.stop_reason, run.output, run.ended_at = None, None, None
    recorder = session._recorder
    if recorder is not None:
        recorder.continuing(run, len(audit) - 1)
    journal = session._journal
    if journal is not None and recorder is not None and recorder.durable is not None:
        journal.start(run.id, recorder.durable.load_steps(run.id))
        mark_replays(session, journal, run.id, decisions)  # a crash cut a continuation: replays
    state = session._new_state(run, transcript, len(history), deps, cancels)
    _restore_options(session, state, paused.get("options"))
    if run.last_agent is not None:  # a receiver of a handoff paused: it goes on
        resume_in(session, state, paused)
    state.audit = audit
    state.turn_index = turn.index
    if state.turn_index and state.settings.tool_choice_once:
        state.release_tool_choice()
    children = paused.get("children") or {}
    system = paused.get("agent_system") if run.last_agent is None else None
    if isinstance(system, str):  # the evaluated instructions, stored at the pause (SPEC 17)
        state.system = system
    else:
        system = None
    state.resuming = Resuming(turn, {r.call_id: r for r in results}, decisions, children, system)
    session._bus.turn = state.turn_index
    return state


async def complete_paused_turn(session: Conversation[Any], state: RunState) -> None:
    """Complete a continued run's paused turn: the decided calls, then the turn's end."""
    resuming = state.resuming
    turn, ran = resuming.turn, resuming.results
    from agentloop.engine.call import CallPipeline, ContinueChild, pending_of

    results: list[ToolResultPart] = []
    again: list[Any] = []
    for call in turn.tool_calls:
        result = ran.get(call.id)
        if result is None:
            state.check_cancel()
            decision: Any = resuming.decisions.get(call.id)
            child = resuming.children.get(call.id)
            if child is not None:
                _continue_child(session, state, call.id, call.name, child, resuming.decisions)
                decision = ContinueChild()
            done = await CallPipeline(session._dispatcher, state, call, decision).run()
            if not isinstance(done, ToolResultPart):
                again.append(done)  # a child agent paused again
                continue
            result = done
        results.append(result)
    state.resuming = None
    if again:
        state.paused = pending_of(again)
        turn.tool_results = results
        raise Paused
    turn.tool_results = results
    state.append(Message.tool_results(results))
    session._turn_done(state, turn)
    state.turn_index += 1


def _continue_child(
    session: Conversation[Any],
    state: RunState,
    call_id: str,
    tool_name: str,
    child: Mapping[str, Any],
    decisions: Mapping[str, Decision],
) -> None:
    """Ready a paused child agent to continue with its share of the decisions."""
    mine = {i: decisions[i] for i in child.get("ids", ()) if i in decisions}
    live = (session._children or {}).get(call_id)
    if live is None:  # another process: the child's session is in the store
        tool = session._dispatcher.registry.get(tool_name)
        agent = getattr(getattr(tool, "inner", tool), "agent", None)
        store = session._recorder.store if session._recorder is not None else None
        if agent is None or store is None:
            raise InvalidInput(
                f"the paused child agent of call {call_id!r} ('{tool_name}') is not in this "
                "process, and a child's pause survives its process only with a store"
            )
        live = agent.session(str(child["session_id"]), store=store)
    if state.children is None:
        state.children = {}
    state.children[call_id] = ("resume", live, mine)


def _instructions(state: RunState) -> dict[str, Any]:
    """The evaluated instructions a continuation reuses (SPEC 17), wherever it runs."""
    return {} if state.system is None else {"agent_system": state.system}


def _options_record(session: Conversation[Any], state: RunState) -> dict[str, Any] | None:
    """The paused run's own ``model_settings=``/``usage_limits=`` (a continued run keeps them).

    Kept in memory as given, and in the record as plain data when they are plain data.
    """
    settings = state.settings if state.settings is not session.agent.config.model_settings else None
    if settings is None and state.budget is None:
        return None
    kept = session._paused_options = {state.run.id: (settings, state.budget)}
    import dataclasses

    import pydantic_core

    record: dict[str, Any] = {}
    for name, value in zip(("model_settings", "usage_limits"), kept[state.run.id], strict=True):
        if value is not None:
            try:
                record[name] = pydantic_core.to_jsonable_python(dataclasses.asdict(value))
            except (TypeError, ValueError, pydantic_core.PydanticSerializationError):
                pass  # not plain data (a price table of objects): kept in this process only
    return record


def _restore_options(
    session: Conversation[Any], state: RunState, record: Mapping[str, Any] | None
) -> None:
    """Put the paused run's own settings and budget back (from memory, else the record)."""
    kept = (session._paused_options or {}).pop(state.run.id, None)
    if kept is None and record:
        from agentloop.model import ModelSettings
        from agentloop.safety.budget import Budget

        try:
            raw = record.get("model_settings")
            settings = None
            if raw is not None:
                stop = raw.get("stop")
                settings = ModelSettings(**{**raw, "stop": tuple(stop) if stop else None})
            raw = record.get("usage_limits")
            kept = (settings, Budget(**raw) if raw is not None else None)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(
                f"run {state.run.id}: its stored options are unreadable: {exc}"
            ) from exc
    if kept is None:
        return
    settings, budget = kept
    if settings is not None:
        state.settings = settings
    state.budget = budget
