"""``agent.override(model=..., tools=...)``: swap an agent's client or tools for a test.

The swap lives in a context variable, so it holds in the task that entered the block and in the
tasks that task creates inside it (asyncio copies the context into each new task), and nowhere
else: another task running the same agent at the same time sees the agent as it was built. It is
read once, when a run starts (``Conversation._new_state``): a run keeps what it started with
even if the block ends while it runs. Leaving the block restores the previous state, on error
too; blocks nest (an inner one replaces what it names and keeps the rest).

The variable maps each overridden agent (its definition) to its ``Swap``; a run of an agent not
in the map, and every run when no block is open, costs one ``ContextVar.get``. Swapped tools run
as they are: a durable wrapper's step or activity view and a store's journal wrap the agent's own
tools only (an override is for tests, not for durable runs).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from agentloop._util.slots import record
from agentloop._util.toolname import check_tool_name
from agentloop.config import resolve_client
from agentloop.engine.output import FINAL_RESULT
from agentloop.errors import ConfigurationError
from agentloop.model import ModelClient
from agentloop.tools import Tool, ToolRegistry

__all__ = ["Swap", "override", "swap_of"]


@record
class Swap:
    """What one agent's runs use instead of their own (None: the agent's own)."""

    client: ModelClient | None = None
    registry: ToolRegistry | None = None
    toolsets: tuple[Any, ...] | None = None
    """``override(toolsets=...)``: the toolsets instead of the agent's (SPEC 22)."""


_SWAPS: ContextVar[Mapping[object, Swap] | None] = ContextVar("agentloop_overrides", default=None)


def swap_of(definition: object) -> Swap | None:
    """The swap in force for ``definition`` in the current context, if any."""
    swaps = _SWAPS.get()
    return None if swaps is None else swaps.get(definition)


@contextmanager
def override(
    definition: Any,
    *,
    model: ModelClient | str | None = None,
    tools: Iterable[Tool | Any] | ToolRegistry | None = None,
    toolsets: Iterable[Any] | None = None,
) -> Iterator[None]:
    """Runs of ``definition`` started in this context use ``model``, ``tools``, ``toolsets``."""
    client = None if model is None else resolve_client(model)
    if client is not None and not callable(getattr(client, "complete", None)):
        raise ConfigurationError(
            "override(model=...) needs a model client or a 'provider:model' string", field="model"
        )
    governor = getattr(definition, "governor", None)
    if client is not None and governor is not None:  # the swapped client waits for it too
        from agentloop.fleet import govern

        client = govern(client, governor, definition.config.token_counter)
    registry = None if tools is None else _registry(tools, typed=definition.output is not None)
    swaps = dict(_SWAPS.get() or {})
    before = swaps.get(definition, Swap())
    sets = before.toolsets
    if toolsets is not None:
        from agentloop.toolsets import checked_toolsets

        sets = checked_toolsets(toolsets)
    swaps[definition] = Swap(client or before.client, registry or before.registry, sets)
    token = _SWAPS.set(swaps)
    try:
        yield
    finally:
        _SWAPS.reset(token)


def _registry(tools: Iterable[Tool | Any] | ToolRegistry, *, typed: bool) -> ToolRegistry:
    """``tools`` as a registry (tool sources such as MCP servers are not swapped in)."""
    if isinstance(tools, ToolRegistry):
        registry = tools
    elif isinstance(tools, str | bytes | Tool) or callable(tools):
        raise ConfigurationError(
            f"override(tools=...) takes a list of tools, got {tools!r}; write tools=[...]",
            field="tools",
        )
    else:
        registry = ToolRegistry(tools)
    for item in registry:
        check_tool_name(item.name)  # SPEC 22, as the agent's own tools
    if typed and FINAL_RESULT in registry:
        raise ConfigurationError(
            f"a tool is named '{FINAL_RESULT}', the name typed output answers with; rename it",
            field="tools",
        )
    return registry
