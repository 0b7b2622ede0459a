"""The Anthropic twin's tool search tool (SPEC 22, provider-rules "Anthropic" tool search).

Replies: ``tool_search_use(call_id, query)`` and ``tool_search_result(call_id, names)`` (a
``tool_search_tool_result`` whose ``tool_references`` name the tools the server loaded).

Rules enforced, each a 400 ``invalid_request_error`` (texts the twin's own where the API's are
not documented; the two quoted in SPEC 22 are the API's):

- Every tool deferred (``defer_loading: true``), the search tool included.
- A deferred function tool without a tool search tool in ``tools``.
- ``defer_loading`` beside ``cache_control`` on one tool.
- A ``tool_reference`` in any message naming a tool ``tools`` does not declare.
https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SEARCH_TOOL_TYPES = {
    "tool_search_tool_bm25_20251119": ("tool_search_tool_bm25", None),
    "tool_search_tool_regex_20251119": ("tool_search_tool_regex", None),
}
EVERY_TOOL_DEFERRED = "All tools have defer_loading set. At least one tool must be non-deferred."
UNDECLARED = "Tool reference '{name}' has no corresponding tool definition"
NO_SEARCH = "tools.{k}.defer_loading: a deferred tool needs a tool search tool in tools"  # twin's
CACHED_DEFERRED = "tools.{k}: a deferred tool cannot have cache_control"  # twin's


def tool_search_use(call_id: str, query: str) -> dict[str, Any]:
    """The ``server_tool_use`` block of a BM25 search."""
    return {"type": "server_tool_use", "id": call_id, "name": "tool_search_tool_bm25",
            "input": {"query": query}}  # fmt: skip


def tool_search_result(call_id: str, names: Sequence[str]) -> dict[str, Any]:
    """A ``tool_search_tool_result`` referencing ``names``."""
    refs = [{"type": "tool_reference", "tool_name": name} for name in names]
    content = {"type": "tool_search_tool_search_result", "tool_references": refs}
    return {"type": "tool_search_tool_result", "tool_use_id": call_id, "content": content}


def search_violation(body: Mapping[str, Any]) -> str | None:
    """The message for the first tool search rule ``body`` breaks, or None."""
    tools = [t for t in body.get("tools") or () if isinstance(t, Mapping)]
    has_search = any(t.get("type") in SEARCH_TOOL_TYPES for t in tools)
    for k, tool in enumerate(tools):
        if tool.get("defer_loading") is True:
            if "cache_control" in tool:
                return CACHED_DEFERRED.format(k=k)
            if not has_search:
                return NO_SEARCH.format(k=k)
    if tools and all(t.get("defer_loading") is True for t in tools):
        return EVERY_TOOL_DEFERRED
    names = {t.get("name") for t in tools}
    for message in body.get("messages") or ():
        for block in message.get("content") if isinstance(message.get("content"), list) else ():
            content = block.get("content") if block.get("type") == "tool_search_tool_result" else {}
            for ref in content.get("tool_references", ()) if isinstance(content, Mapping) else ():
                if ref.get("tool_name") not in names:
                    return UNDECLARED.format(name=ref.get("tool_name"))
    return None
