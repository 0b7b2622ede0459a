"""The Anthropic twin's rules for the ``tools`` array: function tools, and Anthropic's own tools.

A function tool is ``name``, optional ``description``, ``input_schema`` (an object schema) and
optional ``cache_control``. One of Anthropic's client tools is its ``type`` and ``name`` only:
``memory_20250818`` named ``memory``, which exists only behind the beta header
``context-management-2025-06-27`` (https://docs.claude.com/en/docs/agents-and-tools/tool-use/
memory-tool). Extra keys are refused as the API's validation refuses them. The server tools
(web search, ...) have their rules in ``anthropic_server_tools``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .anthropic_server_tools import TOOL_TYPES as SERVER_TOOL_TYPES

MEMORY_TYPE = "memory_20250818"
MEMORY_BETA = "context-management-2025-06-27"
_FUNCTION_KEYS = {"name", "description", "input_schema", "cache_control", "type", "defer_loading"}
_NATIVE_KEYS = {"type", "name", "cache_control"}


def tool_violation(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """The API's message for the first tool ``body`` gets wrong, or None."""
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
    for i, tool in enumerate(body.get("tools") or []):
        kind = tool.get("type", "custom")
        if kind in SERVER_TOOL_TYPES:  # the server tools' own rules (anthropic_server_tools)
            continue
        problem = _memory(i, tool, betas) if kind == MEMORY_TYPE else _function(i, kind, tool)
        if problem is not None:
            return problem
    return None


def _memory(i: int, tool: Mapping[str, Any], betas: set[str]) -> str | None:
    if MEMORY_BETA not in betas:
        return (
            f"tools.{i}: Input tag '{MEMORY_TYPE}' found using 'type' does not match any "
            "of the expected tags (the memory tool needs the beta header "
            f"'anthropic-beta: {MEMORY_BETA}')"
        )
    extra = sorted(set(tool) - _NATIVE_KEYS)
    if extra:
        return f"tools.{i}.{MEMORY_TYPE}.{extra[0]}: Extra inputs are not permitted"
    if tool.get("name") != "memory":
        return f"tools.{i}.{MEMORY_TYPE}.name: Input should be 'memory'"
    return None


def _function(i: int, kind: str, tool: Mapping[str, Any]) -> str | None:
    if kind != "custom":
        return f"tools.{i}: Input tag '{kind}' found using 'type' does not match any tag"
    extra = sorted(set(tool) - _FUNCTION_KEYS)
    if extra:
        return f"tools.{i}.custom.{extra[0]}: Extra inputs are not permitted"
    schema = tool.get("input_schema")
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return f"tools.{i}.custom.input_schema: Input should be an object schema"
    if any(str(k).startswith("x-") for k in schema):
        return f"tools.{i}.custom.input_schema: JSON schema is invalid"
    return None
