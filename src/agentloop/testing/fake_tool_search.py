"""The fake server's native tool search (SPEC 22): scripted searches and Anthropic's rules.

A step's ``tool_search = {query = "...", found = ["name", ...]}`` is a search the provider ran
itself before answering: on ``/v1/messages`` a ``server_tool_use`` block (``tool_search_tool_bm25``)
and a ``tool_search_tool_result`` whose ``tool_references`` name the tools found, on
``/v1/responses`` a ``tool_search_call`` and a ``tool_search_output`` item; the ledger then holds
them to come back unchanged. Every request is checked against the rules Anthropic
enforces (400 ``invalid_request_error``): a deferred tool without the search tool, every tool
deferred, ``defer_loading`` beside ``cache_control``, a ``tool_reference`` to a tool the
request does not declare. The lowest of the fake server's modules beside ``fake_wire``: it
imports none of its siblings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "SEARCH_TYPES",
    "anthropic_search_blocks",
    "check_tool_search",
    "responses_search_items",
    "result_type",
]

SEARCH_TYPES = {
    "tool_search_tool_bm25_20251119": "tool_search_tool_bm25",
    "tool_search_tool_regex_20251119": "tool_search_tool_regex",
}
"""The tool search tools' versioned types and their fixed names."""

ALL_DEFERRED = "All tools have defer_loading set. At least one tool must be non-deferred."
"""The API's own text (SPEC 22)."""
NO_REFERENCE = "Tool reference '{name}' has no corresponding tool definition"
"""The API's own text (SPEC 22)."""
# approximated from the API's tool-definition messages:
NO_SEARCH_TOOL = (
    "tools.{k}: defer_loading requires a tool search tool "
    "(tool_search_tool_bm25_20251119 or tool_search_tool_regex_20251119) in tools"
)
DEFERRED_CACHED = "tools.{k}: cache_control cannot be set on a tool with defer_loading"


def result_type(name: object) -> str:
    """The result block type of a server tool's ``server_tool_use`` name."""
    if name in SEARCH_TYPES.values():
        return "tool_search_tool_result"
    return f"{name}_tool_result"


def anthropic_search_blocks(search: Mapping[str, Any] | None, ident: str) -> list[dict[str, Any]]:
    """The ``server_tool_use`` and ``tool_search_tool_result`` blocks of a scripted search."""
    if not search:
        return []
    call_id = f"srvtoolu_{ident}_ts"
    refs = [{"type": "tool_reference", "tool_name": str(n)} for n in search.get("found", ())]
    return [
        {"type": "server_tool_use", "id": call_id, "name": "tool_search_tool_bm25",
         "input": {"query": str(search.get("query", ""))}},
        {"type": "tool_search_tool_result", "tool_use_id": call_id,
         "content": {"type": "tool_search_tool_search_result", "tool_references": refs}},
    ]  # fmt: skip


def responses_search_items(search: Mapping[str, Any] | None, ident: str) -> list[dict[str, Any]]:
    """The ``tool_search_call`` and ``tool_search_output`` items of a scripted search.

    The output's functions are by name only: the fake server keeps no definitions.
    """
    if not search:
        return []
    call_id = f"call_{ident}_ts"
    tools = [{"type": "function", "name": str(n)} for n in search.get("found", ())]
    return [
        {"type": "tool_search_call", "id": f"tsc_{ident}", "call_id": call_id,
         "execution": "server", "status": "completed",
         "arguments": {"query": str(search.get("query", ""))}},
        {"type": "tool_search_output", "id": f"tso_{ident}", "call_id": call_id,
         "execution": "server", "status": "completed", "tools": tools},
    ]  # fmt: skip


def _references(messages: Sequence[Any]) -> list[str]:
    names: list[str] = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else ():
            inner = block.get("content") if isinstance(block, Mapping) else None
            if block.get("type") == "tool_search_tool_result" and isinstance(inner, Mapping):
                refs = inner.get("tool_references") or ()
                names += [str(r.get("tool_name")) for r in refs if isinstance(r, Mapping)]
    return names


def check_tool_search(body: Mapping[str, Any]) -> str | None:
    """The 400's message for the first tool search rule ``body`` breaks (None: all hold)."""
    tools = [t for t in body.get("tools") or () if isinstance(t, Mapping)]
    searching = any(t.get("type") in SEARCH_TYPES for t in tools)
    for k, tool in enumerate(tools):
        if not tool.get("defer_loading"):
            continue
        if "cache_control" in tool:
            return DEFERRED_CACHED.format(k=k)
        if not searching and tool.get("type") not in SEARCH_TYPES:
            return NO_SEARCH_TOOL.format(k=k)
    if tools and all(t.get("defer_loading") for t in tools):
        return ALL_DEFERRED
    declared = {str(t.get("name")) for t in tools}
    for name in _references(body.get("messages") or ()):
        if name not in declared:
            return NO_REFERENCE.format(name=name)
    return None
