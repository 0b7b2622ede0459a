"""Which tools a continuation of a paused run will have: an approval never spent on nothing.

SPEC 17: an ``Approve`` or ``Edit`` for a call whose tool the agent of its turn does not have is
``InvalidInput`` naming the tool, before anything is recorded. With toolsets (SPEC 22) the
tools are the agent's registry plus what its toolsets offer, and those may differ from the
paused run's: another process or face built with other toolsets, a filter or a dynamic toolset
that no longer offers the tool. Two checks, both before the decisions are recorded:

- ``agent_tools`` (sync; every face's first check): the registry plus the toolsets' static
  names (a toolset that knows its names without running: ``FunctionToolset`` and its
  prefixed/renamed forms); None (not judged here) when a toolset's names are known per call.
- ``check_offered`` (async; ``continue_run`` and ``continue_stream`` once the deps are made):
  the toolsets resolved as the continued run's first offer resolves them (filters, dynamic
  functions, the deps), so a call the continuation would answer ``Tool not found`` is refused.
  ``check_published`` is the same check for a durable run known by its published pause
  (``DBOSAgent.decide``, ``TemporalAgent.decide``): its deps are the run's own (the workflow's
  input), loaded only when a toolset must be resolved; without it the decision was accepted and
  the worker's continuation failed with the run neither paused nor ended.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Container, Mapping
from typing import Any, NamedTuple

from agentloop.errors import AgentLoopError, InvalidInput
from agentloop.pausing import Approve, Decision, Edit, PendingCall, ToolNames, check_tools
from agentloop.tools import ToolRegistry

__all__ = [
    "agent_tools",
    "check_memory",
    "check_offered",
    "check_own_tools",
    "check_published",
    "judged_with_deps",
    "stored_child",
]


def agent_tools(agent: Any) -> ToolNames:
    """The tool names of the agent at a pending call's path, starting at ``agent`` (SPEC 17).

    The tools a continuation runs: ``agent.override(tools=...)``'s when one is in force, else
    the agent's registry, plus its toolsets' static names; a path walks down the ``as_tool()``
    agents that paused. None (not checked) for an agent whose tool sources were not listed yet,
    whose toolsets name their tools per call only, or a child not known here.
    """
    from agentloop.engine.overrides import swap_of

    def names(path: tuple[str, ...]) -> Container[str] | None:
        current = agent
        for name in path:
            tool = _registry(current, swap_of).get(name)
            if tool is None:
                return frozenset()  # the child agent's tool is gone: it runs nothing here
            current = getattr(getattr(tool, "inner", tool), "agent", None)
            if current is None:
                return None
        toolsets = getattr(current, "_toolsets", None)
        if toolsets is not None and toolsets.stale():
            return None  # tool sources not listed yet: the continued run lists them
        registry = _registry(current, swap_of)
        sets = _sets(current, swap_of)
        search = _searching(current, bool(sets) or registry.deferring)
        if not sets:
            return _Either(registry, search) if search else registry
        static = _static(sets)
        return None if static is None else _Either(registry, static | search)

    return names


def _registry(agent: Any, swap_of: Any) -> ToolRegistry:
    swap = swap_of(agent)
    registry: ToolRegistry = agent.registry
    return swap.registry if swap is not None and swap.registry is not None else registry


def _sets(agent: Any, swap_of: Any) -> tuple[Any, ...]:
    """The toolsets a run of ``agent`` resolves: ``override(toolsets=...)``'s, else its own."""
    swap = swap_of(agent)
    if swap is not None and swap.toolsets is not None:
        return tuple(swap.toolsets)
    toolsets = getattr(agent, "_toolsets", None)
    return tuple(toolsets.sets) if toolsets is not None else ()


def _searching(agent: Any, deferring: bool) -> frozenset[str]:
    """``{"search_tools"}`` when a run of ``agent`` may offer it (SPEC 22, local search), else {}.

    A hook's ``Ask`` pauses the engine's own tool as any other (SPEC 17): approving it needs an
    agent whose run offers it, tools deferred and searched locally. With toolsets (``deferring``
    then only means "may defer") ``check_offered`` judges on the resolved tools.
    """
    from agentloop.engine.native_search import native_mode
    from agentloop.errors import ConfigurationError
    from agentloop.toolsets._search import SEARCH_TOOLS

    mode = getattr(getattr(agent, "config", None), "tool_search", "off")  # (an absent receiver)
    if not deferring or mode == "off":
        return frozenset()
    try:
        native = native_mode(mode, getattr(agent, "client", None))
    except ConfigurationError:
        return frozenset()  # "native" on a model without it: the run cannot start
    return frozenset() if native else frozenset({SEARCH_TOOLS})


def _static(sets: tuple[Any, ...]) -> frozenset[str] | None:
    """Every name ``sets`` may offer, or None when one knows its names per call only."""
    found: set[str] = set()
    for toolset in sets:
        static = toolset.static_names()
        if static is None:
            return None
        found.update(static)
    return frozenset(found)


def check_memory(agent: Any, run: Any, child_run: Callable[[str, str], Any] | None = None) -> None:
    """``InvalidInput`` when the paused turn staged memory writes an agent cannot apply (27).

    The paused turn's writes wait on the run until ``continue_run`` completes the turn; an
    agent (the session's own: memory stays the starting agent's, 26) without ``memory=`` would
    complete it and drop them, after the model read that they were kept. A paused child agent
    (``as_tool``) is judged too, before the parent's decisions are recorded (its own continue
    would refuse after them, and the parent's call would read the refusal): ``child_run(call
    id, child session id)`` gives the child's paused run, or None when it is not known here.
    """
    _check_staged(agent, run, "the agent continuing it")
    children = (getattr(run, "paused_turn", None) or {}).get("children") or {}
    if child_run is None or not children:
        return
    from agentloop.engine.overrides import swap_of

    paths = {p.id: p.path for p in run.pending if p.path}
    for call_id, record in children.items():
        path = next((paths[i] for i in record.get("ids", ()) if i in paths), None)
        child = _at(agent, path[:1], swap_of) if path else None
        mine = child_run(call_id, str(record.get("session_id"))) if child is not None else None
        if mine is not None:
            _check_staged(child, mine, f"agent '{path[0]}' continuing it" if path else "")


def stored_child(store: Any, live: Mapping[str, Any] | None = None) -> Callable[[str, str], Any]:
    """``check_memory``'s ``child_run``: a live child session's run, else the stored one.

    ``live``: the parent session's paused children by call id; else the child session's last
    run in ``store``; else None.
    """

    def find(call_id: str, child_session: str) -> Any:
        session = (live or {}).get(call_id)
        if session is not None:
            return session._latest
        runs = store.load_runs(child_session) if store is not None else []
        return runs[-1].run if runs else None

    return find


def _check_staged(agent: Any, run: Any, who: str) -> None:
    record = getattr(run, "memory", None)
    staged = record.get("staged") if isinstance(record, dict) else None
    if not staged or getattr(agent, "memory", None) is not None:
        return
    raise InvalidInput(
        f"run {run.id} paused on a turn that wrote {len(staged)} long-term memory item(s), "
        f"applied when continue_run completes it, and {who} has no memory=: nothing was "
        "recorded and the run stays paused; continue it with an agent built with "
        "Agent(memory=Memory(...)) over the same memory store, or cancel_run() to drop them"
    )


def check_own_tools(
    agent: Any,
    pending: tuple[PendingCall, ...],
    decisions: Mapping[str, Decision],
    own: tuple[Any, ...],
) -> None:
    """``agent_tools``' check, the run's own toolsets' static names counting as the agent's."""
    extra: set[str] = set()
    for toolset in own:
        static = toolset.static_names()
        if static is None:
            return  # known per call only: ``check_offered`` judges
        extra.update(static)
    tools = agent_tools(agent)

    def names(path: tuple[str, ...]) -> Container[str] | None:
        found = tools(path)
        return found if path or found is None or not extra else _Either(found, extra)

    check_tools(pending, decisions, names)


async def check_offered(
    agent: Any,
    run: Any,
    decisions: Mapping[str, Decision],
    deps: Any,
    own: tuple[Any, ...],
) -> None:
    """``InvalidInput`` naming the tool when the continued run's toolsets do not offer it.

    The agent's toolsets (or its override's) and the run's own resolve as the continuation's
    first offer does: a ``RunContext`` of the run at its paused turn, with ``deps``. Only the
    calls whose decision runs them are judged, and only when the agent of their ``path`` has
    toolsets: a child agent's (``as_tool``) resolve with the same deps, which its continuation
    gets from the parent's, at turn 0 (its own paused turn is in its own run).
    """
    from agentloop.engine.overrides import swap_of

    if not _judged(agent, run.pending, decisions, own):
        return
    from agentloop.run import RunContext
    from agentloop.toolsets import Scope

    turn = run.paused_turn.get("turn", {}).get("index", 0) if run.paused_turn else 0
    paths = {p.path for p in run.pending if isinstance(decisions.get(p.call.id), Approve | Edit)}
    for path in sorted(paths):
        current = _at(agent, path, swap_of)
        sets = (*_sets(current, swap_of), *(() if path else own)) if current is not None else ()
        if not sets:
            continue  # agent_tools judged it by its registry
        at = 0 if path else turn
        context = RunContext(run_id=run.id, session_id=run.session_id, deps=deps, turn=at)
        offered = await _offered(current, sets, Scope(context), swap_of)
        if offered is None:
            continue
        mine = tuple(p for p in run.pending if p.path == path)
        check_tools(mine, decisions, _names(offered), why=_by_deps(sets, deps))


def _at(agent: Any, path: tuple[str, ...], swap_of: Any) -> Any:
    """The agent of a pending call's ``path`` (an ``as_tool`` child), or None when not known."""
    current = agent
    for name in path:
        tool = _registry(current, swap_of).get(name)
        current = getattr(getattr(tool, "inner", tool), "agent", None)
        if current is None:
            return None
    return current


async def _offered(agent: Any, sets: tuple[Any, ...], scope: Any, swap_of: Any) -> set[str] | None:
    """The names a run of ``agent`` offers with ``sets`` resolved in ``scope`` (None: unknown)."""
    registry = _registry(agent, swap_of)
    offered: set[str] = set(registry.names())
    deferring = registry.deferring
    try:
        for toolset in sets:
            for entry in await toolset.entries(scope):
                offered.add(entry.spec.name)
                deferring = deferring or entry.deferred
    except AgentLoopError:
        raise  # a source that cannot list its tools: typed, as at a run's start
    except Exception:  # a toolset's own bug: the continued run ends typed (InternalError)
        return None
    return offered | _searching(agent, deferring)


def _by_deps(sets: tuple[Any, ...], deps: Any) -> Callable[[str], str]:
    """Words naming the deps when a toolset could have offered the tool with other deps."""
    static = [toolset.static_names() for toolset in sets]
    dynamic = any(names is None for names in static)
    known = {name for names in static if names is not None for name in names}
    given = "deps=None" if deps is None else f"deps of type {type(deps).__name__}"

    def why(tool: str) -> str:
        if not dynamic and tool not in known:
            return ""  # no toolset has it, whatever the deps: the tool is gone
        return (
            f" (its toolsets, resolved for the paused turn with the continuation's {given}, do "
            "not offer it: a filter or a dynamic toolset decides with the deps, and deps are "
            "not stored with a run; if the run had other deps, pass them again, "
            "continue_run(deps=...), a value or a factory (run) -> deps)"
        )

    return why


def judged_with_deps(agent: Any, run: Any, decisions: Mapping[str, Decision]) -> bool:
    """Whether ``check_offered`` must resolve toolsets with deps for these decisions."""
    return _judged(agent, run.pending, decisions, ())


def _judged(
    agent: Any,
    pending: tuple[PendingCall, ...],
    decisions: Mapping[str, Decision],
    own: tuple[Any, ...],
) -> bool:
    """Whether toolsets must be resolved: a decision runs a call whose agent has some."""
    from agentloop.engine.overrides import swap_of

    for waiting in pending:
        if not isinstance(decisions.get(waiting.call.id), Approve | Edit):
            continue
        current = _at(agent, waiting.path, swap_of)
        if current is not None and ((own and not waiting.path) or _sets(current, swap_of)):
            return True
    return False


class _Published(NamedTuple):
    """A paused durable run as ``check_offered`` reads it: what its workflow published."""

    id: str
    pending: tuple[PendingCall, ...]
    paused_turn: dict[str, Any]
    session_id: str | None = None


async def check_published(
    agent: Any,
    pending: tuple[PendingCall, ...],
    decisions: Mapping[str, Decision],
    deps: Callable[[], Awaitable[Any]],
    *,
    run_id: str,
    turn: int,
    session_id: str | None = None,
) -> None:
    """``check_offered`` for a durable run paused at ``turn``; ``deps()`` loads the run's deps.

    ``deps()`` raising ``LookupError`` means they cannot be read here (a class this process
    cannot import): not judged here, as before the check (the static names were).
    """
    if not _judged(agent, pending, decisions, ()):
        return
    try:
        loaded = await deps()
    except LookupError:
        return
    run = _Published(run_id, pending, {"turn": {"index": turn}}, session_id)
    await check_offered(agent, run, decisions, loaded, ())


def _names(names: set[str]) -> Callable[[tuple[str, ...]], Container[str] | None]:
    """``ToolNames`` answering ``names`` for every path."""
    return lambda path: names


class _Either(Container[str]):
    """The names in either of two containers (a registry and a run's own toolsets' names)."""

    def __init__(self, first: Container[str], second: Container[str]) -> None:
        self.first, self.second = first, second

    def __contains__(self, name: object) -> bool:
        return name in self.first or name in self.second
