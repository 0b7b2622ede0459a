"""What every toolset resolves to on one model call (``Entry``), and a run's ``Scope``.

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
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from agentloop._util.slots import record
from agentloop._util.toolname import check_tool_name
from agentloop.errors import AgentLoopError, ConfigurationError, RemoteAuthError, ToolError
from agentloop.model import ToolSpec
from agentloop.run import RunContext
from agentloop.tools import Tool, ToolContext

__all__ = ["Entry", "Scope", "call_fn", "check_name", "failed", "renamed_tool"]

logger = logging.getLogger("agentloop")

ApprovalCheck = Callable[..., Any]
"""``fn(ctx, spec, arguments) -> bool`` (sync or async): whether this call needs approval."""


def check_name(name: str, what: str = "tool") -> str:
    """``name`` when a provider accepts it as a tool name, else a ``ConfigurationError``."""
    return check_tool_name(name, what, field="toolsets")


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
        known: tuple[int, list[Tool]] | None = getattr(source, "_listed", None)  # per version
        if known is not None and known[0] == version:
            return known[1]
        try:
            tools = list(await source.list_tools())
        except (ConfigurationError, RemoteAuthError):
            raise  # a server refusing our credentials is hard, whenever (SPEC 13)
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


def failed(toolset: Any, what: str, why: str) -> list[Entry]:
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
