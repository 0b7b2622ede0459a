"""The toolset abstraction: what every toolset resolves to on one model call, and the wrappers.

A toolset resolves, per model call, to ``Entry`` values: the tool to run (under the name the model
sees), its ``ToolSpec`` as offered, the toolset it came from, whether it is deferred (SPEC 22's
tool search) and whether a call needs approval. ``filtered``, ``prefixed``, ``renamed``,
``prepared``, ``approval_required`` and ``deferred`` each return a new toolset wrapping this one
(``agentloop.toolsets._wrappers``). ``Scope`` is one run's resolution context: the ``RunContext``
the functions get, and the caches a run keeps (a per-run dynamic toolset's tools, listed sources).
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentloop._util.slots import record
from agentloop.errors import AgentLoopError, ConfigurationError, ToolError
from agentloop.model import ToolSpec
from agentloop.run import RunContext
from agentloop.tools import Tool, ToolContext

if TYPE_CHECKING:
    from agentloop.toolsets._wrappers import (
        ApprovalRequiredToolset,
        DeferredToolset,
        FilteredToolset,
        PrefixedToolset,
        PreparedToolset,
        RenamedToolset,
    )

__all__ = ["AbstractToolset", "Entry", "Scope", "call_fn", "check_name", "failed", "renamed_tool"]

logger = logging.getLogger("agentloop")

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

ApprovalCheck = Callable[..., Any]
"""``fn(ctx, spec, arguments) -> bool`` (sync or async): whether this call needs approval."""


def check_name(name: str, what: str = "tool") -> str:
    """``name`` when a provider accepts it as a tool name, else a ``ConfigurationError``."""
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        raise ConfigurationError(
            f"{what} name {name!r} must be 1-64 characters of A-Z, a-z, 0-9, '_' and '-'",
            field="toolsets",
        )
    return name


@record
class Entry:
    """One tool as a toolset offers it on one model call."""

    tool: Tool
    """The tool that runs, named as the model sees it (``tool.spec()`` is ``spec``)."""
    spec: ToolSpec
    toolset: str
    """The name of the toolset it came from (for collision messages and search descriptions)."""
    deferred: bool = False
    approval: bool | ApprovalCheck = False
    """True: every call needs approval; a function: decides per call; False: none needed."""

    @classmethod
    def of(cls, tool: Tool, toolset: str, *, deferred: bool = False) -> Entry:
        """The entry of a plain tool (``defer_loading`` on the tool defers it)."""
        spec = tool.spec()
        return cls(tool, spec, toolset, deferred or bool(getattr(tool, "defer_loading", False)))

    def with_spec(self, spec: ToolSpec) -> Entry:
        """The entry offered as ``spec`` (a new name runs the same tool under that name)."""
        if spec == self.spec:
            return self
        inner = self.tool.inner if isinstance(self.tool, _Delegate) else self.tool
        return replace(self, tool=_Delegate(inner, spec.name, spec), spec=spec)


class _Delegate(Tool):
    """A tool that runs another tool (renamed, or offered with another spec)."""

    def __init__(self, inner: Tool, name: str, spec: ToolSpec) -> None:
        self.inner = inner
        self.name = name
        self.description = spec.description
        self.parameters = spec.parameters
        self.timeout = inner.timeout
        self.requires_approval = inner.requires_approval
        self.external = inner.external
        self._spec = spec

    def spec(self) -> ToolSpec:
        """The tool as offered."""
        return self._spec

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """The inner tool's validation; its error text names the offered name."""
        try:
            return self.inner.validate(arguments)
        except ToolError as exc:
            text = exc.message.replace(f"tool '{self.inner.name}'", f"tool '{self.name}'", 1)
            raise ToolError(text) from None

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Run the inner tool."""
        return await self.inner.call(arguments, ctx)


def renamed_tool(tool: Tool, name: str) -> Tool:
    """``tool`` offered and run as ``name``."""
    return _Delegate(tool, name, replace(tool.spec(), name=name))


class Scope:
    """One run's resolution context: the functions' ``RunContext`` and the run's caches."""

    def __init__(self, ctx: RunContext[Any]) -> None:
        self.ctx = ctx
        self.cache: dict[int, Any] = {}
        """Per-run values by toolset id (a per-run ``DynamicToolset``'s resolved toolset)."""
        self.starting = True
        """True while the run resolves its first offer (errors then stop the run)."""

    async def listed(self, source: Any) -> list[Tool]:
        """A listed source's tools (MCP), listed again only when its ``version`` changed.

        A source that cannot list when a run starts is a ``ConfigurationError`` naming it; later
        the tools listed before are kept (WARNING) and the run goes on.
        """
        version = source.version
        known = getattr(source, "_listed", None)  # kept on the source: listed once per version
        if known is not None and known[0] == version:
            return known[1]
        try:
            tools = list(await source.list_tools())
        except ConfigurationError:
            raise
        except Exception as exc:
            if self.starting or known is None:
                why = exc.message if isinstance(exc, AgentLoopError) else f"{type(exc).__name__}"
                if not isinstance(exc, AgentLoopError):
                    why += f": {exc}"
                raise ConfigurationError(
                    f"tool source {source.name!r} could not list its tools: {why}", field="toolsets"
                ) from exc
            logger.warning("tool source %r could not refresh its tools", source.name)
            return known[1]
        source._listed = (version, tools)
        return tools


def failed(toolset: AbstractToolset, what: str, why: str) -> list[Entry]:
    """A toolset function raised or returned a wrong type: none of its tools (ERROR log)."""
    logger.error(
        "toolset %r offers no tools on this call: its %s function failed: %s",
        toolset.name,
        what,
        why,
    )
    return []


async def call_fn(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, awaited when it returns an awaitable (sync or async functions alike)."""
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class AbstractToolset:
    """A source of tools resolved per model call; every toolset has the same six wrappers.

    Subclasses implement ``entries``; a toolset whose names are known without a run says so in
    ``static_names`` (collisions are then found when the agent is built). ``instructions`` is
    text the toolset adds to the system prompt (skills' list), ``aclose`` releases what it holds.
    """

    name: str = "toolset"
    _listed: tuple[int, list[Tool]] | None = None
    """A listed source's tools and the ``version`` they were listed at (``Scope.listed``)."""

    async def entries(self, scope: Scope) -> list[Entry]:
        """The toolset's tools on this model call (a listed source's, by default)."""
        return [Entry.of(t, self.name) for t in await scope.listed(self)]

    def static_names(self) -> tuple[str, ...] | None:
        """The names it offers at most, when known without running (None: listed or dynamic)."""
        return None

    def instructions(self) -> str | None:
        """Text for the system prompt (None: nothing)."""
        return None

    def toolsets(self) -> tuple[AbstractToolset, ...]:
        """The toolsets this one wraps, itself last (for instructions and closing)."""
        return (self,)

    async def aclose(self) -> None:
        """Release what the toolset holds (a server, a connection)."""

    # -- the wrappers ------------------------------------------------------------------------

    def filtered(self, fn: Callable[..., Any]) -> FilteredToolset:
        """Offer only the tools for which ``fn(ctx, spec)`` (sync or async) is true."""
        from agentloop.toolsets._wrappers import FilteredToolset

        return FilteredToolset(self, fn)

    def prefixed(self, prefix: str) -> PrefixedToolset:
        """Every tool named ``<prefix>_<name>``."""
        from agentloop.toolsets._wrappers import PrefixedToolset

        return PrefixedToolset(self, prefix)

    def renamed(self, names: Mapping[str, str]) -> RenamedToolset:
        """Tools renamed, ``{new: old}``."""
        from agentloop.toolsets._wrappers import RenamedToolset

        return RenamedToolset(self, names)

    def prepared(self, fn: Callable[..., Any]) -> PreparedToolset:
        """``fn(ctx, specs)`` (sync or async) returns the specs offered on this model call."""
        from agentloop.toolsets._wrappers import PreparedToolset

        return PreparedToolset(self, fn)

    def approval_required(self, fn: ApprovalCheck | None = None) -> ApprovalRequiredToolset:
        """Calls need approval: all of them, or those for which ``fn(ctx, spec, arguments)``."""
        from agentloop.toolsets._wrappers import ApprovalRequiredToolset

        return ApprovalRequiredToolset(self, fn)

    def deferred(self) -> DeferredToolset:
        """Tools not sent until tool search finds them (SPEC 22)."""
        from agentloop.toolsets._wrappers import DeferredToolset

        return DeferredToolset(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
