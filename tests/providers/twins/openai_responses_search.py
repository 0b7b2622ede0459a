"""The Responses twin's hosted tool search (SPEC 22; OpenAI's tool search guide).

``tool_search_items(call_id, names, tools)`` builds a ``tool_search_call`` and its
``tool_search_output`` holding the loaded function definitions (as the API returns them), to
script as a reply's hosted items. Rules, each a 400 (the twin's texts: OpenAI documents none):

- ``{"type": "tool_search"}`` on a model before gpt-5.4 ("only gpt-5.4 and later models support
  tool_search").
- A function with ``defer_loading: true`` and no ``tool_search`` tool.
- A ``tool_search_output`` sent back loading a function ``tools`` does not declare.
https://developers.openai.com/api/docs/guides/tools-tool-search
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

OLD_MODEL = "tool_search is not supported with this model (gpt-5.4 and later support it)."
NO_SEARCH = "tools[{k}]: defer_loading is set but tools has no tool_search tool."
UNDECLARED = "input[{i}]: tool_search_output loads {name!r}, a function tools lacks."
_NEW = re.compile(r"gpt-(?:5\.(?:[4-9]|\d{2,})|(?:[6-9]|\d{2,})(?:\.\d+)?)(?:-.*)?")


def tool_search_items(
    call_id: str, names: Sequence[str], tools: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """A served search: the call and the output loading ``names`` (their definitions)."""
    loaded = [dict(t, defer_loading=True) for t in tools if t.get("name") in names]
    return [
        {"type": "tool_search_call", "id": f"tsc_{call_id}", "call_id": call_id,
         "execution": "server", "status": "completed", "arguments": {"query": "q"}},
        {"type": "tool_search_output", "id": f"tso_{call_id}", "call_id": call_id,
         "execution": "server", "status": "completed", "tools": loaded},
    ]  # fmt: skip


def search_problem(body: Mapping[str, Any], model: str) -> tuple[str, str] | None:
    """The message and ``param`` of the first tool search rule ``body`` breaks, or None."""
    tools = [t for t in body.get("tools") or () if isinstance(t, Mapping)]
    searching = any(t.get("type") == "tool_search" for t in tools)
    if searching and not _NEW.fullmatch(model):
        return OLD_MODEL, "tools"
    for k, tool in enumerate(tools):
        if tool.get("defer_loading") is True and not searching:
            return NO_SEARCH.format(k=k), "tools"
    declared = {t.get("name") for t in tools if t.get("type") == "function"}
    for i, item in enumerate(body.get("input") or ()):
        if isinstance(item, Mapping) and item.get("type") == "tool_search_output":
            for loaded in item.get("tools") or ():
                if loaded.get("name") not in declared:
                    return UNDECLARED.format(i=i, name=loaded.get("name")), "input"
    return None
