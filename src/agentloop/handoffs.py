"""Handoffs (SPEC 26, the OpenAI Agents SDK's names): another agent takes the conversation over.

``Agent(..., handoffs=[billing, handoff(refunds, input_filter=remove_tool_calls)])`` offers the
model one no-argument tool per handoff, ``transfer_to_<name>``; calling it answers
``Transferred to '<name>'.`` and, from the next turn, the receiver's client, tools and
instructions (evaluated at the handoff) rule the **same run** of the **same session**: same
run id, usage summed, no model request of its own. ``Turn.agent``, ``Event.agent`` and
``run.last_agent`` name the active agent (None: the starting one); ``HandoffOccurred`` marks
the moment. ``RunConfig.max_handoffs`` (10) bounds them: one more is ``HandoffLimitExceeded``.

What the receiver's requests show of the transcript before the handoff is the whole of it by
default (lost context is what users of other libraries report); an ``input_filter`` shapes it
instead, once, at the handoff (``remove_tool_calls`` drops the calls and their results).
Committed history keeps everything either way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentloop.errors import ConfigurationError
from agentloop.messages import Message, ToolCallPart, ToolResultPart

__all__ = ["Handoff", "InputFilter", "handoff", "handoff_name", "remove_tool_calls"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,52}$")

InputFilter = Callable[[Sequence[Message]], Sequence[Message]]
"""``input_filter(messages) -> messages``: what the receiver's requests show of the past."""


@dataclass(frozen=True)
class Handoff:
    """An agent the run may hand off to; ``handoff(...)`` makes one."""

    agent: Any
    """The receiving ``Agent``."""
    name: str
    """The handoff's name: the tool is ``transfer_to_<name>``; events and turns say ``name``."""
    description: str | None = None
    """What the model reads about when to hand off (default: the receiver's name)."""
    input_filter: InputFilter | None = None
    """Shapes the transcript the receiver's requests show (None: all of it)."""

    @property
    def tool_name(self) -> str:
        """``transfer_to_<name>``, the tool the model calls."""
        return f"transfer_to_{self.name}"


def handoff(
    agent: Any,
    *,
    name: str | None = None,
    description: str | None = None,
    input_filter: InputFilter | None = None,
) -> Handoff:
    """A handoff to ``agent`` for ``Agent(handoffs=[...])`` (``name``: default the agent's)."""
    return Handoff(agent, handoff_name(agent, name), description, input_filter)


def handoff_name(agent: Any, name: str | None) -> str:
    """The handoff's name: ``name``, else the agent's ``Agent(name=)`` (ConfigurationError)."""
    chosen = name if name is not None else getattr(agent, "name", None)
    if chosen is None:
        raise ConfigurationError(
            f"a handoff to {agent!r} needs a name: give the agent one, Agent(..., name='billing'), "
            "or the handoff, handoff(agent, name='billing')",
            field="handoffs",
        )
    if not isinstance(chosen, str) or not _NAME.match(chosen):
        raise ConfigurationError(
            f"handoff name {chosen!r} must be 1-52 letters, digits, '_' or '-' (it becomes the "
            f"tool name transfer_to_<name>)",
            field="handoffs",
        )
    return chosen


def remove_tool_calls(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without tool calls and their results (messages left empty are dropped)."""
    kept: list[Message] = []
    for message in messages:
        parts = tuple(p for p in message.parts if not isinstance(p, ToolCallPart | ToolResultPart))
        if parts:
            kept.append(
                message
                if len(parts) == len(message.parts)
                else Message(message.role, parts, phase=message.phase)
            )
    return kept
