"""The shapes ``OtelObserver`` writes: token counts and messages by the GenAI conventions.

Kept apart from ``agentloop.otel`` (the span tree) because they are pure functions from the
run's records to attribute values, as ``agentloop._otel_events`` is for span events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import pydantic_core

from agentloop.messages import Message, TextPart, ToolCallPart, Usage

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

__all__ = [
    "INPUT_TOKENS",
    "OUTPUT_TOKENS",
    "jsonable",
    "message",
    "message_of",
    "text",
    "usage_attributes",
]

Attributes: TypeAlias = "dict[str, AttributeValue]"

INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
"""Output tokens spent reasoning (part of ``gen_ai.usage.output_tokens``; no text kept)."""


def text(content: str) -> dict[str, Any]:
    """A text part of a GenAI-conventions message."""
    return {"type": "text", "content": content}


def usage_attributes(usage: Usage) -> Attributes:
    """Token counts by the GenAI conventions (input includes the cached counts, sent if any)."""
    attributes: Attributes = {INPUT_TOKENS: usage.input_tokens, OUTPUT_TOKENS: usage.output_tokens}
    if usage.cache_read_tokens:
        attributes[CACHE_READ_TOKENS] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attributes[CACHE_WRITE_TOKENS] = usage.cache_write_tokens
    if usage.reasoning_tokens:
        attributes[REASONING_TOKENS] = usage.reasoning_tokens
    return attributes


def message(role: str, parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A GenAI-conventions message of ``role`` with ``parts``."""
    return {"role": role, "parts": list(parts)}


def message_of(reply: Message, finish_reason: str | None) -> dict[str, Any]:
    """A reply in the GenAI conventions' message shape (text and tool-call parts)."""
    parts: list[dict[str, Any]] = []
    for part in reply.parts:
        if isinstance(part, TextPart):
            parts.append(text(part.text))
        elif isinstance(part, ToolCallPart):
            call = {"id": part.id, "name": part.name, "arguments": dict(part.arguments)}
            parts.append({"type": "tool_call", **call})
    shaped = message(reply.role, parts)
    if finish_reason:
        shaped["finish_reason"] = finish_reason
    return shaped


def jsonable(value: Any) -> Any:
    """``value`` made JSON-ready (``str`` for what pydantic cannot shape)."""
    return pydantic_core.to_jsonable_python(value, fallback=str)
