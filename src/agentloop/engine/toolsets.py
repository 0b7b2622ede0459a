"""Tool sources whose tools are listed at run time (MCP servers), kept in the agent's registry.

A ``Toolset`` is listed when a run starts and again whenever its ``version`` changed (an MCP
``tools/list_changed`` notification bumps it) before a model call. A toolset that cannot list
its tools when a run starts is a ``ConfigurationError`` naming it; later, a failed refresh keeps
the tools already listed (logged) so the run goes on. A name listed by two sources (or by a
source and a local tool) is a ``ConfigurationError`` when a run starts; in a list that changed
mid-run it never ends the run: the source's colliding tool is skipped, with a warning naming
it, and the tool already there keeps the name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentloop._util.toolname import tool_name_problem
from agentloop.errors import AgentLoopError, ConfigurationError, RemoteAuthError
from agentloop.tools import Tool, ToolRegistry, Toolset

if TYPE_CHECKING:
    from agentloop.toolsets import AbstractToolset

__all__ = ["Toolsets"]

logger = logging.getLogger("agentloop")


class Toolsets:
    """An agent's toolsets and what each put in its registry (shared by the agent's forks)."""

    def __init__(
        self, toolsets: Sequence[Toolset], registry: ToolRegistry, sets: object = ()
    ) -> None:
        self.toolsets = tuple(toolsets)
        self.sets: tuple[AbstractToolset, ...] = ()
        """``Agent(toolsets=...)`` (SPEC 22), resolved per model call by ``engine.offering``."""
        if sets != ():  # the toolsets package loads only for an agent given some
            from agentloop.toolsets import checked_toolsets

            self.sets = checked_toolsets(sets, registry.names())
        self.registry = registry
        self._versions: list[int | None] = [None] * len(self.toolsets)
        self._names: list[list[str]] = [[] for _ in self.toolsets]
        self._lock = asyncio.Lock()

    def stale(self) -> bool:
        """Whether a toolset changed since it was last listed."""
        return any(t.version != v for t, v in zip(self.toolsets, self._versions, strict=True))

    async def refresh(self, *, starting: bool) -> bool:
        """List the toolsets that changed; True when the registry changed."""
        if not self.toolsets or not self.stale():
            return False
        async with self._lock:
            changed = False
            for index, toolset in enumerate(self.toolsets):
                if toolset.version == self._versions[index]:
                    continue
                version = toolset.version
                try:
                    tools = list(await toolset.list_tools())
                except (ConfigurationError, RemoteAuthError, asyncio.CancelledError):
                    raise
                except Exception as exc:
                    if starting:
                        raise _cannot_list(toolset, exc) from exc
                    logger.warning("tool source %r could not refresh its tools", toolset.name)
                    continue
                self._replace(index, toolset, tools, starting=starting)
                self._versions[index] = version
                changed = True
            return changed

    def _replace(self, index: int, toolset: Toolset, tools: list[Tool], *, starting: bool) -> None:
        for name in self._names[index]:
            self.registry.unregister(name)
        listed: list[str] = []
        for item in tools:
            problem = tool_name_problem(item.name, f"tool source {toolset.name!r} lists a tool;")
            if problem is not None:  # SPEC 22: no provider takes it
                if starting:
                    raise ConfigurationError(problem, field="tools")
                logger.warning("%s; the source's tool is skipped", problem)
                continue
            if item.name in self.registry:
                taken = (
                    f"tool source {toolset.name!r} lists a tool named {item.name!r}, a name "
                    "already taken"
                )
                if starting:
                    raise ConfigurationError(f"{taken}; give the source a prefix", field="tools")
                logger.warning("%s; the source's tool is skipped (give it a prefix)", taken)
                continue
            self.registry.register(item)
            listed.append(item.name)
        self._names[index] = listed

    async def aclose(self) -> None:
        """Close every toolset (all of them, even when one fails; the first error is raised)."""
        first: BaseException | None = None
        closing: tuple[Toolset | AbstractToolset, ...] = (*self.toolsets, *self.sets)
        for toolset in closing:
            try:
                await toolset.aclose()
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first


def _cannot_list(toolset: Toolset, exc: Exception) -> ConfigurationError:
    why = exc.message if isinstance(exc, AgentLoopError) else f"{type(exc).__name__}: {exc}"
    return ConfigurationError(
        f"tool source {toolset.name!r} could not list its tools: {why}", field="tools"
    )
