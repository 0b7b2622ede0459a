"""``AgentOptions``: the keywords ``Agent.resume`` passes on to ``Agent``, typed for callers.

Its own module so the agent's keeps room for behaviour; the types load only for type checkers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from agentloop.clock import Clock
    from agentloop.config import RunConfig
    from agentloop.engine.instructions import Instructions
    from agentloop.fleet import RateGovernor
    from agentloop.guardrails import Guardrail
    from agentloop.hooks import Approver, Hook
    from agentloop.memory import Memory
    from agentloop.observers import Observer
    from agentloop.provider_tools import ProviderTool
    from agentloop.tools import Tool, ToolRegistry, Toolset
    from agentloop.toolsets import AbstractToolset

__all__ = ["AgentOptions"]


class AgentOptions(TypedDict, total=False):
    """The keyword arguments ``Agent.resume`` passes on to ``Agent``."""

    tools: Iterable[Tool | Toolset | ProviderTool | Callable[..., Any]] | ToolRegistry
    system: Instructions | None
    instructions: Instructions | None
    config: RunConfig | None
    hooks: Sequence[Hook]
    observers: Sequence[Observer]
    approver: Approver | None
    guardrails: Sequence[Guardrail]
    memory: Memory | None
    toolsets: Sequence[AbstractToolset]
    clock: Clock
    provider_tools: Sequence[ProviderTool]
    governor: RateGovernor | None
    name: str | None
    handoffs: Sequence[Any]  # an agent that hands off resumes with its receivers (SPEC 26)
