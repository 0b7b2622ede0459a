"""Anthropic server tools (SPEC 24, provider-rules "Anthropic Messages: server tools").

Declarations become versioned entries of ``tools``: ``web_search_20250305`` (``web_search``),
``web_fetch_20250910`` (``web_fetch``, beta ``web-fetch-2025-09-10``) and
``code_execution_20250825`` (``code_execution``, beta ``code-execution-2025-08-25``), after the
function tools. ``FileSearch`` has no Anthropic form: ``ConfigurationError`` before sending.

Replies carry ``server_tool_use`` blocks (a ``ProviderToolCallPart``) and ``*_tool_result``
blocks (a ``ProviderToolResultPart``; an ``*_error`` content is ``is_error`` with its
``error_code``), each keeping the block as received in ``raw``; they go back unchanged and in
place (the API rejects a turn that altered them; the encrypted fields are opaque). A text
block's ``citations`` become ``Citation``s, the objects kept in ``raw`` and sent back on the
block. ``usage.server_tool_use`` (``web_search_requests``...) is ``Usage.provider_tool_calls``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentloop.messages import (
    Citation,
    Part,
    ProviderToolCallPart,
    ProviderToolResultPart,
    TextPart,
)
from agentloop.provider_tools import ProviderTool, UserLocation, WebFetch, WebSearch
from agentloop.providers._provider_tools import Wire, check
from agentloop.providers.profiles import profile_for

__all__ = [
    "WIRE",
    "betas",
    "check_tools",
    "citations",
    "decode_server_block",
    "encode_server_part",
    "encode_text",
    "encode_tools",
    "is_server_block",
    "tool_calls_used",
]

PROVIDER = "anthropic"
_FILTERS = frozenset({"max_uses", "allowed_domains", "blocked_domains"})
WIRE = Wire(
    "anthropic (Messages API)",
    {
        "web_search": _FILTERS | {"user_location"},
        "web_fetch": _FILTERS,
        "code_execution": frozenset(),
    },
)
_TYPES = {
    "web_search": "web_search_20250305",
    "web_fetch": "web_fetch_20250910",
    "code_execution": "code_execution_20250825",
}
_BETAS = {"web_fetch": "web-fetch-2025-09-10", "code_execution": "code-execution-2025-08-25"}


def check_tools(tools: Sequence[ProviderTool], model: str, *, functions: bool) -> None:
    """``ConfigurationError`` for a tool ``model`` cannot take on the Messages API."""
    check(tools, WIRE, model, profile_for(PROVIDER, model), functions=functions)


def _location(location: UserLocation) -> dict[str, Any]:
    return {"type": "approximate", **location.to_dict()}


def _entry(tool: ProviderTool) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": _TYPES[tool.kind], "name": tool.kind}
    if isinstance(tool, WebSearch | WebFetch):
        if tool.max_uses is not None:
            entry["max_uses"] = tool.max_uses
        if tool.allowed_domains:
            entry["allowed_domains"] = list(tool.allowed_domains)
        if tool.blocked_domains:
            entry["blocked_domains"] = list(tool.blocked_domains)
    if isinstance(tool, WebSearch) and tool.user_location is not None:
        entry["user_location"] = _location(tool.user_location)
    return entry


def encode_tools(tools: Sequence[ProviderTool]) -> list[dict[str, Any]]:
    """The ``tools`` entries of the declarations, in their order."""
    return [_entry(tool) for tool in tools]


def betas(tools: Sequence[ProviderTool]) -> tuple[str, ...]:
    """The ``anthropic-beta`` values the declarations need (none for web search)."""
    return tuple(_BETAS[t.kind] for t in tools if t.kind in _BETAS)


def is_server_block(kind: object) -> bool:
    """A server tool's block: ``server_tool_use`` or a ``*_tool_result`` other than ours."""
    return kind == "server_tool_use" or (
        isinstance(kind, str) and kind.endswith("_tool_result") and kind != "tool_result"
    )


def _readable(content: object) -> Any:
    """What a result says, without its opaque (encrypted) fields."""
    if isinstance(content, list):
        return [_readable(item) for item in content]
    if isinstance(content, Mapping):
        return {
            k: _readable(v)
            for k, v in content.items()
            if not k.startswith("encrypted") and k != "type"
        }
    return content


def decode_server_block(block: Mapping[str, Any]) -> Part:
    """A ``server_tool_use`` or ``*_tool_result`` block as a part keeping it as ``raw``."""
    raw = dict(block)
    if block.get("type") == "server_tool_use":
        arguments = block.get("input")
        return ProviderToolCallPart(
            str(block.get("id", "")),
            str(block.get("name", "")),
            dict(arguments) if isinstance(arguments, Mapping) else {},
            provider=PROVIDER,
            raw=raw,
        )
    content = block.get("content")
    code = content.get("error_code") if isinstance(content, Mapping) else None
    failed = isinstance(content, Mapping) and str(content.get("type", "")).endswith("_error")
    return ProviderToolResultPart(
        str(block.get("tool_use_id", "")),
        str(block.get("type", "")).removesuffix("_tool_result"),
        _readable(content),
        provider=PROVIDER,
        raw=raw,
        is_error=failed or code is not None,
        error_code=str(code) if code is not None else None,
    )


def citations(items: object) -> tuple[Citation, ...]:
    """A text block's ``citations`` (``web_search_result_location``...), each kept raw."""
    if not isinstance(items, list):
        return ()
    found = []
    for item in items:
        if isinstance(item, Mapping):
            title, cited = item.get("title"), item.get("cited_text")
            found.append(
                Citation(
                    str(item.get("url") or ""),
                    title if isinstance(title, str) else None,
                    cited if isinstance(cited, str) else None,
                    raw=dict(item),
                )
            )
    return tuple(found)


def encode_text(part: TextPart) -> dict[str, Any]:
    """A cited text block as received: its Anthropic citation objects go back on it."""
    cited = [
        dict(c.raw)
        for c in part.citations
        if c.raw is not None and str(c.raw.get("type", "")).endswith("_location")
    ]
    if not cited:
        return {"type": "text", "text": part.text}
    return {"type": "text", "text": part.text, "citations": cited}


def encode_server_part(
    part: ProviderToolCallPart | ProviderToolResultPart,
) -> dict[str, Any] | None:
    """Our own server block, unchanged; another provider's is never sent (None)."""
    if part.provider != PROVIDER or part.raw is None:
        return None
    return dict(part.raw)


def tool_calls_used(value: object) -> dict[str, int]:
    """``usage.server_tool_use`` as counts by kind (``web_search_requests`` -> web_search)."""
    if not isinstance(value, Mapping):
        return {}
    counts = {}
    for key, count in value.items():
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            counts[str(key).removesuffix("_requests")] = count
    return counts
