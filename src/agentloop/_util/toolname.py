"""The one rule for a tool's name (SPEC 22): what every provider accepts, checked once.

Plain tools are checked when an agent is built (or a tool added), agent tools when
``as_tool`` makes them, listed sources (MCP) when a listing arrives, toolset entries when a run
starts: never per model call.
"""

from __future__ import annotations

import re

from agentloop.errors import ConfigurationError

__all__ = ["TOOL_NAME", "check_tool_name", "tool_name_problem"]

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def tool_name_problem(name: object, what: str = "tool") -> str | None:
    """Why ``name`` is not a tool name a provider accepts, or None when it is."""
    if isinstance(name, str) and TOOL_NAME.fullmatch(name) is not None:
        return None
    return f"{what} name {name!r} must be 1-64 characters of A-Z, a-z, 0-9, '_' and '-'"


def check_tool_name(name: str, what: str = "tool", *, field: str = "tools") -> str:
    """``name`` when a provider accepts it as a tool name, else a ``ConfigurationError``."""
    problem = tool_name_problem(name, what)
    if problem is not None:
        raise ConfigurationError(problem, field=field)
    return name
