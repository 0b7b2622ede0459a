"""The Gemini twin's built-in tools (SPEC 24, provider-rules "Gemini generateContent: built-in").

Rules, each with Google's wording (400 ``INVALID_ARGUMENT``):

- Gemini 2.x: a built-in tool (``google_search``, ``code_execution``, ``url_context``) beside
  ``functionDeclarations`` is "Tool use with function calling is unsupported" (reported).
- Gemini 3: the combination needs ``toolConfig.includeServerSideToolInvocations: true``.
- An ``executableCode``/``codeExecutionResult`` part sent back must be one the twin served,
  unchanged (the twin's own rule, standing for the API's check of its signed parts).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

BUILT_IN = frozenset({"google_search", "code_execution", "url_context"})
PART_KEYS = ("executableCode", "codeExecutionResult", "toolCall", "toolResponse")
WITH_FUNCTIONS_2X = "Tool use with function calling is unsupported"
NEEDS_FLAG = (
    "Please enable tool_config.include_server_side_tool_invocations to use Built-in tools with "
    "Function calling."
)
ALTERED = "twin: built-in tool part contents[{i}].parts[{j}] is not one the twin served"


def key(part: Mapping[str, Any]) -> str:
    """A part's identity for the served-parts check."""
    return json.dumps(part, sort_keys=True)


def violation(model: str, body: Mapping[str, Any], served: set[str], gemini_3: bool) -> str | None:
    """Google's message for the first built-in tool rule ``body`` breaks, or None."""
    tools = body.get("tools") or []
    built_in = any(BUILT_IN.intersection(t) for t in tools if isinstance(t, Mapping))
    functions = any("functionDeclarations" in t for t in tools if isinstance(t, Mapping))
    if built_in and functions:
        if not gemini_3:
            return WITH_FUNCTIONS_2X
        flag = (body.get("toolConfig") or {}).get("includeServerSideToolInvocations")
        if flag is not True:
            return NEEDS_FLAG
    for i, content in enumerate(body.get("contents") or []):
        for j, part in enumerate(content.get("parts") or []):
            if any(k in part for k in PART_KEYS) and key(part) not in served:
                return ALTERED.format(i=i, j=j)
    return None
