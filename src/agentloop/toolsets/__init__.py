"""Toolsets: one composable abstraction over our tools, MCP servers and skills (SPEC 22).

``FunctionToolset`` holds our own tools, ``DynamicToolset`` builds them per run (or per model
call), ``agentloop.mcp.MCPServer`` lists a server's and ``agentloop.skills.SkillSet`` reads a
folder of skills. Every toolset has ``filtered``, ``prefixed``, ``renamed``, ``prepared``,
``approval_required`` and ``deferred``, each returning a new toolset. Give them to
``Agent(toolsets=[...])``, to one run (``run(..., toolsets=[...])``), or swap them in a test
(``agent.override(toolsets=[...])``). Names follow pydantic-ai's toolsets.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentloop.errors import ConfigurationError
from agentloop.toolsets._base import (
    AbstractToolset,
    ApprovalRequiredToolset,
    DeferredToolset,
    FilteredToolset,
    PrefixedToolset,
    PreparedToolset,
    RenamedToolset,
    WrapperToolset,
)
from agentloop.toolsets._entry import Entry, Scope
from agentloop.toolsets._function import DynamicToolset, FunctionToolset
from agentloop.toolsets._search import SearchIndex

__all__ = [
    "AbstractToolset",
    "ApprovalRequiredToolset",
    "DeferredToolset",
    "DynamicToolset",
    "Entry",
    "FilteredToolset",
    "FunctionToolset",
    "PrefixedToolset",
    "PreparedToolset",
    "RenamedToolset",
    "Scope",
    "SearchIndex",
    "WrapperToolset",
    "checked_toolsets",
]


def checked_toolsets(
    toolsets: object, names: Iterable[str] = (), *, field: str = "toolsets"
) -> tuple[AbstractToolset, ...]:
    """``toolsets`` as a tuple, each one a toolset; static name collisions found now.

    ``names``: tools offered beside them (``Agent(tools=...)``). Raises ``ConfigurationError``
    naming a non-toolset, or two tools with one name (``give one a prefix``).
    """
    if isinstance(toolsets, AbstractToolset) or not isinstance(toolsets, Iterable):
        raise ConfigurationError(
            f"{field} must be a list of toolsets, got {toolsets!r}; write {field}=[...]",
            field=field,
        )
    items = tuple(_Listed(t) if _is_source(t) else t for t in toolsets)
    owners = dict.fromkeys(names, "tools")
    for item in items:
        if not isinstance(item, AbstractToolset):
            raise ConfigurationError(
                f"{field}=[...] holds {item!r}, not a toolset: use FunctionToolset([...]) for "
                "tools, an MCPServer, a SkillSet, or a source with list_tools() and version",
                field=field,
            )
        for name in item.static_names() or ():
            if name in owners:
                raise ConfigurationError(
                    f"two tools are named '{name}' (toolsets '{owners[name]}' and "
                    f"'{item.name}'); give one a prefix",
                    field=field,
                )
            owners[name] = item.name
    return items


def _is_source(item: object) -> bool:
    """A tool source of ``agentloop.tools.Toolset``'s shape that is not a toolset yet."""
    return not isinstance(item, AbstractToolset) and callable(getattr(item, "list_tools", None))


class _Listed(AbstractToolset):
    """A tool source (``list_tools``, ``version``, ``aclose``) as a toolset: listed per version."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.name = str(getattr(source, "name", "tools"))

    async def entries(self, scope: Scope) -> list[Entry]:
        """The source's tools, listed again when its ``version`` changed."""
        return [Entry.of(t, self.name) for t in await scope.listed(self.source)]

    async def aclose(self) -> None:
        """Close the source."""
        await self.source.aclose()
