"""``AbstractToolset`` and its six wrappers: filter, prefix, rename, prepare, approval, deferral.

A filter or prepare function runs on every model call with the run's ``RunContext``; one that
raises or returns a wrong type offers none of its toolset's tools on that call (fails closed,
ERROR log) and the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from agentloop._util.toolname import TOOL_NAME
from agentloop.errors import ConfigurationError
from agentloop.model import ToolSpec
from agentloop.tools import Tool
from agentloop.toolsets._entry import (
    ApprovalCheck,
    Entry,
    Scope,
    call_fn,
    check_name,
    failed,
)

__all__ = [
    "AbstractToolset",
    "ApprovalRequiredToolset",
    "DeferredToolset",
    "FilteredToolset",
    "PrefixedToolset",
    "PreparedToolset",
    "RenamedToolset",
    "WrapperToolset",
]


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
        return FilteredToolset(self, fn)

    def prefixed(self, prefix: str) -> PrefixedToolset:
        """Every tool named ``<prefix>_<name>``."""
        return PrefixedToolset(self, prefix)

    def renamed(self, names: Mapping[str, str]) -> RenamedToolset:
        """Tools renamed, ``{new: old}``."""
        return RenamedToolset(self, names)

    def prepared(self, fn: Callable[..., Any]) -> PreparedToolset:
        """``fn(ctx, specs)`` (sync or async) returns the specs offered on this model call."""
        return PreparedToolset(self, fn)

    def approval_required(self, fn: ApprovalCheck | None = None) -> ApprovalRequiredToolset:
        """Calls need approval: all of them, or those for which ``fn(ctx, spec, arguments)``."""
        return ApprovalRequiredToolset(self, fn)

    def deferred(self) -> DeferredToolset:
        """Tools not sent until tool search finds them (SPEC 22)."""
        return DeferredToolset(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class WrapperToolset(AbstractToolset):
    """A toolset that changes what another one offers (named as the one it wraps)."""

    def __init__(self, wrapped: AbstractToolset) -> None:
        if not isinstance(wrapped, AbstractToolset):
            raise ConfigurationError(
                f"not a toolset: {wrapped!r}; wrap a FunctionToolset, an MCPServer or a SkillSet",
                field="toolsets",
            )
        self.wrapped = wrapped
        self.name = wrapped.name

    async def entries(self, scope: Scope) -> list[Entry]:
        """The wrapped toolset's entries, unchanged (subclasses change them)."""
        return await self.wrapped.entries(scope)

    def static_names(self) -> tuple[str, ...] | None:
        """The wrapped toolset's."""
        return self.wrapped.static_names()

    def toolsets(self) -> tuple[AbstractToolset, ...]:
        """The wrapped chain, then this one."""
        return (*self.wrapped.toolsets(), self)

    async def aclose(self) -> None:
        """Close the wrapped toolset."""
        await self.wrapped.aclose()


class FilteredToolset(WrapperToolset):
    """Only the tools ``fn(ctx, spec)`` keeps."""

    def __init__(self, wrapped: AbstractToolset, fn: Callable[..., Any]) -> None:
        super().__init__(wrapped)
        self.fn = _callable(fn, "filtered")

    async def entries(self, scope: Scope) -> list[Entry]:
        """The kept entries; none at all when the function fails."""
        kept: list[Entry] = []
        for entry in await self.wrapped.entries(scope):
            try:
                keep = await call_fn(self.fn, scope.ctx, entry.spec)
            except Exception as exc:
                return failed(self, "filtered", f"{type(exc).__name__}: {exc}")
            if not isinstance(keep, bool):
                return failed(self, "filtered", f"returned {type(keep).__name__}, not bool")
            if keep:
                kept.append(entry)
        return kept


class PrefixedToolset(WrapperToolset):
    """Every tool named ``<prefix>_<name>``."""

    def __init__(self, wrapped: AbstractToolset, prefix: str) -> None:
        super().__init__(wrapped)
        if not isinstance(prefix, str) or TOOL_NAME.fullmatch(prefix) is None:
            raise ConfigurationError(
                f"toolset {wrapped.name!r}: prefix {prefix!r} must be a non-empty string of "
                "A-Z, a-z, 0-9, '_' and '-'",
                field="prefix",
            )
        self.prefix = prefix
        for name in self.static_names() or ():
            check_name(name)

    def _name(self, name: str) -> str:
        return f"{self.prefix}_{name}"

    async def entries(self, scope: Scope) -> list[Entry]:
        """The entries, renamed."""
        entries = await self.wrapped.entries(scope)
        return [e.with_spec(replace(e.spec, name=self._name(e.spec.name))) for e in entries]

    def static_names(self) -> tuple[str, ...] | None:
        """The wrapped names, prefixed."""
        names = self.wrapped.static_names()
        return None if names is None else tuple(self._name(n) for n in names)


class RenamedToolset(WrapperToolset):
    """Tools renamed, ``{new: old}``; a name not renamed keeps its own."""

    def __init__(self, wrapped: AbstractToolset, names: Mapping[str, str]) -> None:
        super().__init__(wrapped)
        if not isinstance(names, Mapping):
            raise ConfigurationError("renamed() takes a mapping {new: old}", field="toolsets")
        self.names = {check_name(new): old for new, old in names.items()}
        self.old = {old: new for new, old in self.names.items()}
        known = wrapped.static_names()
        if known is not None:
            self._check(known)

    def _check(self, known: tuple[str, ...]) -> None:
        missing = sorted(old for old in self.old if old not in known)
        if missing:
            raise ConfigurationError(
                f"toolset {self.name!r} has no tool named {missing[0]!r} to rename "
                f"(it has: {', '.join(sorted(known)) or 'none'})",
                field="toolsets",
            )

    async def entries(self, scope: Scope) -> list[Entry]:
        """The entries, renamed (a listed toolset's missing name stops the run's start)."""
        entries = await self.wrapped.entries(scope)
        if scope.starting and self.wrapped.static_names() is None:
            self._check(tuple(e.spec.name for e in entries))
        return [
            e.with_spec(replace(e.spec, name=self.old[e.spec.name]))
            if e.spec.name in self.old
            else e
            for e in entries
        ]

    def static_names(self) -> tuple[str, ...] | None:
        """The wrapped names, renamed."""
        names = self.wrapped.static_names()
        return None if names is None else tuple(self.old.get(n, n) for n in names)


class PreparedToolset(WrapperToolset):
    """``fn(ctx, specs)`` returns the specs offered on this call (a subset; texts may change)."""

    def __init__(self, wrapped: AbstractToolset, fn: Callable[..., Any]) -> None:
        super().__init__(wrapped)
        self.fn = _callable(fn, "prepared")

    async def entries(self, scope: Scope) -> list[Entry]:
        """The entries the function returned specs for, offered with those specs."""
        entries = await self.wrapped.entries(scope)
        by_name = {e.spec.name: e for e in entries}
        try:
            specs = await call_fn(self.fn, scope.ctx, [e.spec for e in entries])
        except Exception as exc:
            return failed(self, "prepared", f"{type(exc).__name__}: {exc}")
        if not isinstance(specs, list | tuple) or not all(isinstance(s, ToolSpec) for s in specs):
            return failed(self, "prepared", f"returned {type(specs).__name__}, not ToolSpecs")
        unknown = [s.name for s in specs if s.name not in by_name]
        if unknown:
            return failed(self, "prepared", f"returned a tool it was not given: {unknown[0]!r}")
        return [by_name[s.name].with_spec(s) for s in specs]


class ApprovalRequiredToolset(WrapperToolset):
    """Calls need approval, as ``@tool(requires_approval=True)``: all, or those ``fn`` says."""

    def __init__(self, wrapped: AbstractToolset, fn: ApprovalCheck | None = None) -> None:
        super().__init__(wrapped)
        self.fn = None if fn is None else _callable(fn, "approval_required")

    async def entries(self, scope: Scope) -> list[Entry]:
        """The entries, marked."""
        mark: bool | ApprovalCheck = True if self.fn is None else self.fn
        return [replace(e, approval=mark) for e in await self.wrapped.entries(scope)]


class DeferredToolset(WrapperToolset):
    """Tools not sent until tool search finds them (or a call loads one)."""

    async def entries(self, scope: Scope) -> list[Entry]:
        """The entries, deferred."""
        return [replace(e, deferred=True) for e in await self.wrapped.entries(scope)]


def _callable(fn: object, method: str) -> Callable[..., Any]:
    if not callable(fn):
        raise ConfigurationError(f"{method}() takes a function, got {fn!r}", field="toolsets")
    return fn
