"""The tools one model call offers, for a run with toolsets or deferred tools (SPEC 22).

``ToolPlan.offer`` is the engine's one per-call computation of offered tools: before each model
call it resolves the run's toolsets (filters, prepare functions, dynamic toolsets), drops the
deferred tools not loaded yet (offering ``search_tools`` instead), checks names, and sets the
run's ``offer`` and ``registry``. A call is judged against the offer of the request whose reply
holds it. A run of an agent with no toolset and no deferred tool has no plan: nothing here runs.
Loaded tools stay for the run and the session's later runs (``Session.loaded_tools``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentloop._util.toolname import tool_name_problem
from agentloop.engine.native_search import Deferred, found, native_mode
from agentloop.errors import ConfigurationError, ToolError
from agentloop.messages import Message
from agentloop.model import ToolSpec
from agentloop.run import RunContext
from agentloop.tools import Tool, ToolContext, ToolRegistry
from agentloop.toolsets import AbstractToolset, Entry, Scope
from agentloop.toolsets._entry import call_fn, check_name
from agentloop.toolsets._search import (
    SEARCH_TOOLS,
    SearchIndex,
    found_text,
    index_of,
    search_description,
)

if TYPE_CHECKING:
    from agentloop.engine.definition import Definition
    from agentloop.engine.state import Offer, RunState

__all__ = ["LOADED_TEXT", "ToolPlan", "loaded_by", "plan_for"]

logger = logging.getLogger("agentloop")

LOADED_TEXT = "tool '{name}' was not loaded; it is loaded now: call it again"
APPROVAL_FAILED = "blocked: approval check failed: {kind}: {message}"


class SearchTool(Tool):
    """``search_tools(query, limit=5)``: BM25 over the run's deferred tools; loads what it finds."""

    name = SEARCH_TOOLS
    runs_inline = True
    """Never journaled nor a durable step: each call must load what it finds, replays too."""
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What the tool should do, in a few words"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
        },
        "required": ["query"],
    }

    def __init__(self, plan: ToolPlan, description: str) -> None:
        self.plan = plan
        self.description = description
        self._spec = ToolSpec(self.name, description, self.parameters)

    def spec(self) -> ToolSpec:
        """The tool as offered (built once)."""
        return self._spec

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """``query`` a string, ``limit`` an integer from 1 to 20."""
        query, limit = arguments.get("query"), arguments.get("limit", 5)
        problem = None
        if not isinstance(query, str):
            problem = "query: Input should be a valid string"
        elif not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 20:
            problem = "limit: Input should be an integer from 1 to 20"
        if problem is not None:
            raise ToolError(f"Invalid arguments for tool '{SEARCH_TOOLS}': {problem}")
        return {"query": query, "limit": limit}

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """The tools found (loaded from the next step), or ``no tool matches``."""
        return self.plan.find(arguments["query"], arguments["limit"])


class _Approval(Tool):
    """A toolset tool whose calls need approval when ``check(ctx, spec, arguments)`` says so."""

    requires_approval = True

    def __init__(self, inner: Tool, check: Any) -> None:
        self.inner, self.check = inner, check
        self.name, self.description = inner.name, inner.description
        self.parameters, self.timeout, self.external = inner.parameters, inner.timeout, False

    def spec(self) -> ToolSpec:
        """The inner tool's."""
        return self.inner.spec()

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """The inner tool's."""
        return self.inner.validate(arguments)

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """The inner tool's."""
        return await self.inner.call(arguments, ctx)

    async def approval_check(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> bool:
        """Whether this call needs approval (``gates`` turns a raise into a block)."""
        return bool(await call_fn(self.check, ctx, self.inner.spec(), dict(arguments)))


class ToolPlan:
    """One run's toolsets, deferred tools and loaded set; computes each call's offer."""

    def __init__(
        self,
        agent: Definition[Any],
        toolsets: Sequence[AbstractToolset],
        base: ToolRegistry,
        loaded: Iterable[str],
    ) -> None:
        self.agent = agent
        self.toolsets = tuple(toolsets)
        self.base = base
        self.loaded: dict[str, None] = dict.fromkeys(loaded)
        self.deferred: dict[str, Entry] = {}
        self.scope: Scope | None = None
        self.state: RunState | None = None
        self._index: SearchIndex | None = None
        self._indexed: tuple[str, ...] = ()
        self._searchable: list[Entry] = []
        self._search: SearchTool | None = None
        self._offered: dict[str, str] = {}
        self._fresh: int | None = None
        """The turn whose offer ``start`` computed (a continuation's: its paused turn's)."""
        self.native = False
        """The provider searches (SPEC 22, native): deferred tools are offered marked."""
        self._wrapped: dict[str, Tool] = {}
        self.view: Any = None
        """The dispatcher's view of tools (a journal, durable steps): the plan's tools go through
        it too (``ToolsView.over``)."""
        self.emit: Callable[[list[str], str], None] | None = None
        """Reports loaded tools (the session's ``ToolsLoaded`` event)."""

    def instructions(self) -> str | None:
        """What the toolsets add to the system prompt (a skills list), or None."""
        texts = [
            text
            for toolset in self.toolsets
            for part in toolset.toolsets()
            if (text := part.instructions())
        ]
        return "\n\n".join(texts) if texts else None

    async def start(self, state: RunState) -> None:
        """At run start: the first call's offer, and the toolsets' instructions in the prompt."""
        await self.offer(state)
        self._fresh = state.turn_index
        extra = self.instructions()
        if extra:
            text = f"{state.system}\n\n{extra}" if state.system else extra
            state.system = text

    async def offer(self, state: RunState) -> None:
        """Resolve the toolsets for this model call and set ``state.offer``/``state.registry``."""
        fresh, self._fresh = self._fresh, None
        if fresh == state.turn_index:  # computed at run start, for this very call
            return
        scope = self.scope
        if scope is None:
            ctx: RunContext[Any] = RunContext(
                run_id=state.run.id, session_id=state.run.session_id, deps=state.deps
            )
            scope = self.scope = Scope(ctx)
            self.state = state
        scope.ctx.turn = state.turn_index
        entries = await self._entries(scope)
        mode = self.agent.config.tool_search
        if scope.starting:
            self.native = native_mode(mode, state.client)
        deferred: dict[str, Entry] = {}
        kept: list[Entry] = []
        for entry in entries:
            if entry.deferred and mode != "off" and entry.spec.name not in self.loaded:
                deferred[entry.spec.name] = entry
            if entry.deferred and mode != "off" and not self.native:
                if entry.spec.name not in self.loaded:
                    continue
            kept.append(entry)
        self.deferred = deferred
        searching = mode != "off" and not self.native
        self._searchable = [e for e in entries if e.deferred] if searching else []
        if scope.starting:
            self._check_start(state, entries)
            scope.starting = False
        state.offer, registry = self._registry(state, kept)
        self._offered = {e.spec.name: e.toolset for e in entries}
        view = self.view
        state.registry = registry if view is None else view.over(registry)

    def _registry(self, state: RunState, kept: list[Entry]) -> tuple[Offer, ToolRegistry]:
        """The offer and the tools that run for it (``search_tools`` when tools are deferred)."""
        registry = ToolRegistry()
        searching = bool(self._searchable)
        for entry in kept:
            if searching and entry.spec.name == SEARCH_TOOLS:  # a newcomer mid-run
                logger.warning("a tool named '%s' is skipped: tool search is on", SEARCH_TOOLS)
                continue
            registry.register(self._native(entry) if self.native else _runnable(entry))
        if searching:
            registry.register(self._search_tool())
        return self.agent._offer(state.client, registry), registry

    async def _entries(self, scope: Scope) -> list[Entry]:
        """The base tools and every toolset's, one per name (a collision at start is an error)."""
        seen: dict[str, Entry] = {}
        for tool in self.base:
            seen[tool.name] = Entry.of(tool, "tools")
        for toolset in self.toolsets:
            for entry in await toolset.entries(scope):
                name = entry.spec.name
                prior = seen.get(name)
                if prior is None:
                    if not scope.starting and name not in self._offered and _misnamed(name):
                        continue  # a newcomer mid-run no provider takes (at start: the error)
                    seen[name] = entry
                    continue
                text = (
                    f"two tools are named '{name}' (toolsets '{prior.toolset}' and "
                    f"'{entry.toolset}'); give one a prefix"
                )
                if scope.starting:
                    raise ConfigurationError(text, field="toolsets")
                logger.warning("%s; the newcomer is skipped", text)
                if self._offered.get(name) == entry.toolset != prior.toolset:
                    seen[name] = entry  # the one offered before keeps the name
        return list(seen.values())

    def _check_start(self, state: RunState, entries: list[Entry]) -> None:
        """Names a provider takes, names tool search needs, a forced choice not loaded yet."""
        for entry in entries:
            if entry.toolset != "tools":  # a listed or dynamic toolset's names, known now
                check_name(entry.spec.name)
        if self._searchable and any(e.spec.name == SEARCH_TOOLS for e in entries):
            raise ConfigurationError(
                f"a tool is named '{SEARCH_TOOLS}', the name of tool search's own tool: rename "
                "it, or set RunConfig(tool_search='off')",
                field="tools",
            )
        choice = state.settings.tool_choice
        if isinstance(choice, str) and choice in self.deferred:
            raise ConfigurationError(
                f"tool_choice names '{choice}', a deferred tool not loaded yet: load it first "
                "(a tool search) or do not defer it",
                field="tool_choice",
            )

    def _native(self, entry: Entry) -> Tool:
        """A deferred tool marked for the provider's search; any other tool as it runs.

        One object per deferred tool: the offer stays byte-identical while tools load.
        """
        tool = _runnable(entry)
        if not entry.deferred:
            return tool
        known = self._wrapped.get(entry.spec.name)
        if known is None or getattr(known, "inner", None) is not tool:
            known = self._wrapped[entry.spec.name] = Deferred(tool)
        return known

    def _search_tool(self) -> SearchTool:
        """``search_tools``, the same object while the deferred tools are the same.

        Loading one changes nothing of it: the offered tools stay byte-identical for an
        append-only conversation (SPEC 28).
        """
        searchable = self._searchable
        text = search_description(len(searchable), [e.toolset for e in searchable])
        if self._search is None or self._search.description != text:
            self._search = SearchTool(self, text)
        return self._search

    def find(self, query: str, limit: int) -> str:
        """``search_tools``: the best matches among deferred tools, loaded from the next step.

        No match is the soft error ``no tool matches '<query>'`` (a ``ToolError``).

        The index covers every deferred tool, loaded or not, so loading does not rebuild it.
        """
        names = tuple(e.spec.name for e in self._searchable)
        if self._index is None or names != self._indexed:
            self._index = index_of([e.spec for e in self._searchable])
            self._indexed = names
        found = self._index.search(query, limit)
        if not found:  # SPEC 22: `no tool matches '<query>'` is a soft error (SPEC 3)
            raise ToolError(found_text(query, found))
        self.load([s.name for s in found], "search")
        return found_text(query, found)

    def load(self, names: Sequence[str], via: str) -> None:
        """Load ``names``: offered from the next model call on, for this run and the session's."""
        new = [n for n in names if n not in self.loaded]
        if not new:
            return
        self.loaded.update(dict.fromkeys(new))
        self._fresh = None  # a continuation's first offer (its paused turn's) is out of date
        state = self.state
        if state is not None:
            state.run.loaded_tools.extend(new)
        if self.emit is not None:
            self.emit(new, via)

    def searched(self, message: Message) -> None:
        """What the provider's own searches in a reply loaded (SPEC 22, native), recorded."""
        self.load(found([message], 0), "native")

    def load_on_call(self, name: str) -> str | None:
        """A call to a deferred tool not loaded: load it and say so; None for any other name."""
        if name not in self.deferred:
            return None
        self.load([name], "call")
        return LOADED_TEXT.format(name=name)


def _runnable(entry: Entry) -> Tool:
    """The tool to register for ``entry`` (wrapped when its calls need approval)."""
    approval = entry.approval
    if approval is False:
        return entry.tool
    if approval is True:
        return _Approval(entry.tool, _always)
    return _Approval(entry.tool, approval)


def _always(ctx: ToolContext, spec: ToolSpec, arguments: Mapping[str, Any]) -> bool:
    return True


def loaded_by(history: Sequence[Message]) -> list[str]:
    """The tool names a history's tool searches loaded (a seeded history's), local or native."""
    names = found(history, 0)
    for message in history:
        for part in message.tool_results_parts:
            if part.name != SEARCH_TOOLS or part.is_error:
                continue
            for line in part.content.splitlines()[1:]:
                if line.startswith("- ") and ":" in line:
                    names.append(line[2:].split(":", 1)[0].strip())
    return names


def plan_for(
    agent: Definition[Any],
    registry: ToolRegistry | None,
    toolsets: Sequence[AbstractToolset],
    loaded: Iterable[str],
) -> ToolPlan | None:
    """The run's plan; None (no work per call) without toolsets or deferred tools."""
    base = agent.registry if registry is None else registry
    if not toolsets and not base.deferring:
        return None
    return ToolPlan(agent, toolsets, base, loaded)


def _misnamed(name: str) -> bool:
    """Whether a tool newly listed mid-run has a name no provider takes (WARNING, SPEC 22)."""
    problem = tool_name_problem(name)
    if problem is not None:
        logger.warning("%s; the newcomer is skipped", problem)
    return problem is not None
