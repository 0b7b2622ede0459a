"""Native tool search on the wire (SPEC 22): which models have it, and what a search found.

Anthropic (every Claude 4.x and later model, Fable and Mythos included; on the Claude API only,
not Bedrock Converse nor Vertex here): ``tools`` gains the BM25 tool search tool
``{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}`` and each deferred
tool ``"defer_loading": true``. The reply's ``server_tool_use`` and ``tool_search_tool_result``
blocks are provider parts (SPEC 24's, kept raw and sent back in place); the result's
``tool_references`` name the tools the API loaded, whose definitions every later request must
still carry (they stay in ``tools``, deferred: nothing already sent changes).
https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "ANTHROPIC_SEARCH_TOOL",
    "anthropic_has",
    "has_native",
    "lacking",
    "referenced",
]

ANTHROPIC_SEARCH_TOOL: Mapping[str, str] = {
    "type": "tool_search_tool_bm25_20251119",
    "name": "tool_search_tool_bm25",
}
"""The BM25 tool search tool's entry in ``tools`` (never deferred)."""

_CLAUDE_4_ON = re.compile(r"claude-(?:[a-z]+-(?:[4-9]|\d{2,})|[4-9]-[a-z]+)\b.*")
"""Claude 4.x and later names (``claude-opus-4-1``, ``claude-4-sonnet``, ``claude-fable-5``...);
not ``claude-3-7-sonnet`` nor ``claude-3-5-*``."""


def anthropic_has(model: str) -> bool:
    """Whether ``model`` takes the tool search tool on the Claude API."""
    return _CLAUDE_4_ON.fullmatch(model.lower().rpartition("/")[2]) is not None


def has_native(client: object) -> bool:
    """Whether every model ``client`` may send to has native tool search."""
    return lacking(client) is None


def lacking(client: object) -> object | None:
    """The first client of ``client`` whose model has no native tool search (None: none).

    A client says so with ``native_tool_search``; a ``FallbackClient`` answers for all its
    models; a wrapper without the attribute answers for the client it wraps (``inner``). A
    client that says nothing has none (local search: fails closed).
    """
    current = client
    for _ in range(8):
        models = getattr(current, "clients", None)
        if isinstance(models, tuple) and models:
            return next((found for c in models if (found := lacking(c)) is not None), None)
        said = getattr(current, "native_tool_search", None)
        if isinstance(said, bool):
            return None if said else current
        inner = getattr(current, "inner", None)
        if inner is None:
            return current
        current = inner
    return current


def referenced(raw: Mapping[str, Any] | None) -> list[str]:
    """The tool names a ``tool_search_tool_result`` block references (none for an error)."""
    if raw is None or raw.get("type") != "tool_search_tool_result":
        return []
    content = raw.get("content")
    refs = content.get("tool_references") if isinstance(content, Mapping) else None
    return _names(refs if isinstance(refs, list) else ())


def _names(refs: Iterable[object]) -> list[str]:
    return [
        str(ref["tool_name"])
        for ref in refs
        if isinstance(ref, Mapping) and isinstance(ref.get("tool_name"), str)
    ]
