"""Toolsets of our own tools: ``FunctionToolset`` (static) and ``DynamicToolset`` (built per run).

A ``DynamicToolset``'s function ``fn(ctx)`` returns tools or a toolset; it runs once per run, or
before every model call with ``per_step=True``. One that raises or returns a wrong type offers
nothing: on that call (``per_step``) or for the whole run (ERROR log); the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, overload

from agentloop._util.peers import hinting
from agentloop.errors import ConfigurationError
from agentloop.tools import FunctionTool, Tool, ToolRegistry, tool
from agentloop.toolsets._base import AbstractToolset
from agentloop.toolsets._entry import Entry, Scope, call_fn, check_name, failed

__all__ = ["DynamicToolset", "FunctionToolset"]


class FunctionToolset(AbstractToolset):
    """Our own tools as a toolset: ``FunctionToolset([a, b], name="files")``, ``@ts.tool``."""

    def __init__(
        self, tools: Iterable[Tool | Callable[..., Any]] = (), *, name: str | None = None
    ) -> None:
        if isinstance(tools, str | bytes | Tool) or not isinstance(tools, Iterable):
            raise ConfigurationError(
                f"FunctionToolset takes a list of tools, got {tools!r}; write tools=[...]",
                field="toolsets",
            )
        self.name = name or "functions"
        self._registry = ToolRegistry()
        self._entries: list[Entry] | None = None
        for item in tools:
            self.add(item)

    def add(self, item: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a plain function is wrapped with ``@tool``)."""
        made = self._registry.register(item)
        check_name(made.name)
        self._entries = None
        return made

    @overload
    def tool(self, func: Callable[..., Any], /) -> FunctionTool: ...

    @overload
    def tool(self, /, **options: Any) -> Callable[[Callable[..., Any]], FunctionTool]: ...

    def tool(
        self, func: Callable[..., Any] | None = None, /, **options: Any
    ) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
        """``@ts.tool`` / ``@ts.tool(name=..., defer_loading=True, ...)``: add a function."""

        def register(f: Callable[..., Any]) -> FunctionTool:
            made = tool(**options)(f)
            self.add(made)
            return made

        return register(func) if func is not None else register

    async def entries(self, scope: Scope) -> list[Entry]:
        """Every tool (built once, until a tool is added)."""
        if self._entries is None:
            self._entries = [Entry.of(t, self.name) for t in self._registry]
        return self._entries

    def static_names(self) -> tuple[str, ...] | None:
        """The tools' names."""
        return tuple(t.name for t in self._registry)


class DynamicToolset(AbstractToolset):
    """``fn(ctx)`` returns tools or a toolset, once per run (``per_step=True``: per model call)."""

    @hinting({"per_run_step": "per_step="})
    def __init__(
        self, fn: Callable[..., Any], *, per_step: bool = False, name: str | None = None
    ) -> None:
        if not callable(fn):
            raise ConfigurationError(
                f"DynamicToolset takes a function, got {fn!r}", field="toolsets"
            )
        self.fn = fn
        self.per_step = bool(per_step)
        self.name = str(name or getattr(fn, "__name__", "dynamic"))

    async def entries(self, scope: Scope) -> list[Entry]:
        """The function's toolset's entries (none when it failed)."""
        key = id(self)
        built = None if self.per_step else scope.cache.get(key)
        if built is None:
            built = await self._build(scope)
            if not self.per_step:
                scope.cache[key] = built
        if isinstance(built, str):  # the function failed: nothing (for the run, unless per step)
            return failed(self, "dynamic", built) if self.per_step or scope.starting else []
        return await built.entries(scope)

    async def _build(self, scope: Scope) -> AbstractToolset | str:
        """The toolset the function returned, or why it could not be used."""
        try:
            made = await call_fn(self.fn, scope.ctx)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        if isinstance(made, AbstractToolset):
            return made
        if made is None:
            made = ()
        if isinstance(made, str | bytes) or not isinstance(made, Iterable):
            return f"returned {type(made).__name__}, not tools or a toolset"
        try:
            return FunctionToolset(list(made), name=self.name)
        except ConfigurationError as exc:
            return exc.message
