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

The Responses API (gpt-5.4 and later): ``{"type": "tool_search"}`` beside functions marked
``"defer_loading": true``; the output's ``tool_search_call`` and ``tool_search_output`` items
(the latter holding the loaded definitions) go back unchanged in ``input`` (``store: false``).
https://developers.openai.com/api/docs/guides/tools-tool-search
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["ANTHROPIC_SEARCH_TOOL", "RESPONSES_SEARCH_TOOL", "anthropic_has", "responses_has"]

ANTHROPIC_SEARCH_TOOL: Mapping[str, str] = {
    "type": "tool_search_tool_bm25_20251119",
    "name": "tool_search_tool_bm25",
}
"""The BM25 tool search tool's entry in ``tools`` (never deferred)."""

RESPONSES_SEARCH_TOOL: Mapping[str, str] = {"type": "tool_search"}
"""The Responses API's hosted tool search (gpt-5.4 and later), beside deferred functions."""

_GPT_54_ON = re.compile(r"gpt-(?:5\.(?:[4-9]|\d{2,})|(?:[6-9]|\d{2,})(?:\.\d+)?)(?:-.*)?")
"""gpt-5.4 and later names (``gpt-5.4``, ``gpt-5.5-mini``, ``gpt-6``...)."""

_CLAUDE_4_ON = re.compile(r"claude-(?:[a-z]+-(?:[4-9]|\d{2,})|[4-9]-[a-z]+)\b.*")
"""Claude 4.x and later names (``claude-opus-4-1``, ``claude-4-sonnet``, ``claude-fable-5``...);
not ``claude-3-7-sonnet`` nor ``claude-3-5-*``."""


def anthropic_has(model: str) -> bool:
    """Whether ``model`` takes the tool search tool on the Claude API."""
    return _CLAUDE_4_ON.fullmatch(model.lower().rpartition("/")[2]) is not None


def responses_has(model: str) -> bool:
    """Whether ``model`` takes ``{"type": "tool_search"}`` on the Responses API."""
    return _GPT_54_ON.fullmatch(model.lower().rpartition("/")[2]) is not None
