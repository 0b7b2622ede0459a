"""Native tool search on the wire (SPEC 22): which models have it, and what a search found.

Anthropic (every Claude 4.x and later model, Fable and Mythos included; on the Claude API only,
not Bedrock Converse nor Vertex here): ``tools`` gains the BM25 tool search tool
``{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}`` and each deferred
tool ``"defer_loading": true``. The reply's ``server_tool_use`` and ``tool_search_tool_result``
blocks are provider parts (SPEC 24's, kept raw and sent back in place); the result's
``tool_references`` name the tools the API loaded, whose definitions every later request must
still carry (they stay in ``tools``, deferred: nothing already sent changes). The engine reads
those names with ``agentloop.messages``' ``tools_referenced`` (it never imports a provider).
https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["ANTHROPIC_SEARCH_TOOL", "anthropic_has"]

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
