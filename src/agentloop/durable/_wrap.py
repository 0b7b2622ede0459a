"""What every durable wrapper (``DBOSAgent``, ``TemporalAgent``) checks of what it wraps."""

from __future__ import annotations

from agentloop.engine.agent import Agent
from agentloop.errors import ConfigurationError

__all__ = ["checked_wrap"]


def checked_wrap(kind: str, agent: object, name: object) -> None:
    """Refuse a ``name`` that is not a non-empty str and an ``agent`` that is not an ``Agent``."""
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"{kind} needs a name (a non-empty str)", field="name")
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"{kind} wraps an agentloop Agent", field="agent")
