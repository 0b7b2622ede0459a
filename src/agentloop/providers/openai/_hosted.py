"""OpenAI's hosted tools (SPEC 24): the Responses API writes them, Chat Completions refuses them.

Responses API declarations: ``web_search`` (``filters.allowed_domains``, ``user_location`` of
type ``approximate``), ``code_interpreter`` (``container: {"type": "auto"}``) and
``file_search`` (``vector_store_ids``, ``max_num_results``). No web fetch, no
``blocked_domains``, no ``max_uses``: ``ConfigurationError`` before sending.

Output items ``web_search_call``, ``code_interpreter_call`` and ``file_search_call`` (and any
other hosted ``*_call`` the API adds) each become a ``ProviderToolCallPart`` keeping the item raw,
sent back unchanged and in place, and a ``ProviderToolResultPart`` of what it found (nothing to
send back: the item holds both); a ``failed`` status is ``is_error`` with ``error_code``
``"failed"``. ``url_citation`` annotations on output text are ``Citation``s. Each call item
counts one in ``Usage.provider_tool_calls``.

Chat Completions (OpenAI, OpenRouter, Ollama, any compatible server) has no hosted tools: any
is a ``ConfigurationError`` naming ``api="responses"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentloop.messages import Citation, Part, ProviderToolCallPart, ProviderToolResultPart
from agentloop.provider_tools import FileSearch, ProviderTool, WebSearch
from agentloop.providers._provider_tools import Wire, check
from agentloop.providers.profiles import profile_for

__all__ = [
    "RESPONSES",
    "check_chat",
    "check_responses",
    "citations",
    "decode_item",
    "encode_tools",
    "is_hosted_call",
    "search_output",
]

PROVIDER = "openai"
RESPONSES = Wire(
    "openai (Responses API)",
    {
        "web_search": frozenset({"allowed_domains", "user_location"}),
        "code_execution": frozenset(),
        "file_search": frozenset({"max_results"}),
    },
)
_CLIENT_CALLS = frozenset(
    {"function_call", "custom_tool_call", "computer_call", "local_shell_call", "shell_call"}
)
_NAMES = {"web_search_call": "web_search", "code_interpreter_call": "code_execution"}
_QUIET = frozenset({"type", "id", "status"})


def check_responses(tools: Sequence[ProviderTool], model: str, *, functions: bool) -> None:
    """``ConfigurationError`` for a hosted tool ``model`` cannot take on the Responses API."""
    check(tools, RESPONSES, model, profile_for(PROVIDER, model), functions=functions)


def check_chat(tools: Sequence[ProviderTool], model: str, provider: str) -> None:
    """Chat Completions takes none: ``ConfigurationError`` naming the fix."""
    fix = (
        'use the Responses API: Settings(provider="openai", api="responses")'
        if provider == "openai"
        else f"{provider} has no provider tools; use the provider's own API "
        '(Settings(provider="openai", api="responses"), anthropic or gemini)'
    )
    wire = Wire(f"Chat Completions ({provider})", {}, fix)
    check(tools, wire, model, profile_for(PROVIDER, model), functions=False)


def _entry(tool: ProviderTool) -> dict[str, Any]:
    if isinstance(tool, WebSearch):
        entry: dict[str, Any] = {"type": "web_search"}
        if tool.allowed_domains:
            entry["filters"] = {"allowed_domains": list(tool.allowed_domains)}
        if tool.user_location is not None:
            entry["user_location"] = {"type": "approximate", **tool.user_location.to_dict()}
        return entry
    if isinstance(tool, FileSearch):
        entry = {"type": "file_search", "vector_store_ids": list(tool.vector_store_ids)}
        if tool.max_results is not None:
            entry["max_num_results"] = tool.max_results
        return entry
    return {"type": "code_interpreter", "container": {"type": "auto"}}


def encode_tools(tools: Sequence[ProviderTool]) -> list[dict[str, Any]]:
    """The ``tools`` entries of the declarations, after the function tools."""
    return [_entry(tool) for tool in tools]


def is_hosted_call(kind: object) -> bool:
    """An output item of a tool the provider ran (``web_search_call``...)."""
    return isinstance(kind, str) and kind.endswith("_call") and kind not in _CLIENT_CALLS


def decode_item(item: Mapping[str, Any]) -> tuple[Part, Part]:
    """A hosted call item as its call part (the item raw) and its result part."""
    kind = str(item.get("type"))
    name = _NAMES.get(kind, kind.removesuffix("_call"))
    call_id = str(item.get("id") or "")
    arguments = item.get("action")
    if not isinstance(arguments, Mapping):
        arguments = {k: v for k, v in item.items() if k in ("queries", "code", "container_id")}
    found = {k: v for k, v in item.items() if k not in _QUIET and k != "action"}
    failed = item.get("status") == "failed"
    return (
        ProviderToolCallPart(call_id, name, dict(arguments), provider=PROVIDER, raw=dict(item)),
        ProviderToolResultPart(
            call_id,
            name,
            found,
            provider=PROVIDER,
            is_error=failed,
            error_code="failed" if failed else None,
        ),
    )


def search_output(item: Mapping[str, Any]) -> Part:
    """A ``tool_search_output`` item (SPEC 22): the tools it loaded, the item kept raw."""
    tools = item.get("tools")
    names = [
        str(t.get("name")) for t in (tools if isinstance(tools, list) else ())
        if isinstance(t, Mapping)
    ]  # fmt: skip
    return ProviderToolResultPart(
        str(item.get("call_id") or item.get("id") or ""),
        "tool_search",
        names,
        provider=PROVIDER,
        raw=dict(item),
    )


def citations(annotations: object) -> tuple[Citation, ...]:
    """``url_citation`` annotations of an output text, as citations."""
    if not isinstance(annotations, list):
        return ()
    found = []
    for note in annotations:
        if isinstance(note, Mapping) and note.get("type") == "url_citation":
            title, start, end = note.get("title"), note.get("start_index"), note.get("end_index")
            found.append(
                Citation(
                    str(note.get("url") or ""),
                    title if isinstance(title, str) else None,
                    start=start if isinstance(start, int) else None,
                    end=end if isinstance(end, int) else None,
                    raw=dict(note),
                )
            )
    return tuple(found)
