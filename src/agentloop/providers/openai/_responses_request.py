"""Encoding a request for OpenAI's Responses API: the transcript as input items, the settings.

Pure (no I/O): ``encode_request`` is the whole mapping, which ``responses.py`` documents and
re-exports. Each message is encoded once (``Message.encoded``: its items and the media parts
they carry, ``_responses_media``) and reused on later turns; carried media are checked against
the model on every request; tool and output schemas go through the strict-mode rewrite Chat
Completions uses (``_chat_strict``, cached per schema object).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from agentloop.errors import ConfigurationError, TranscriptError
from agentloop.messages import (
    Message,
    ProviderPart,
    ProviderToolCallPart,
    ProviderToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from agentloop.model import (
    INVALID_JSON_KEY,
    ModelRequest,
    ModelSettings,
    OutputSpec,
    ToolSpec,
    with_tool_changes,
)
from agentloop.providers._tool_search import RESPONSES_SEARCH_TOOL
from agentloop.providers.openai import _hosted as hosted
from agentloop.providers.openai._chat_strict import strict_schema
from agentloop.providers.openai._responses_media import (
    MEDIA,
    ResponsesWire,
    encode_tool_results,
    encode_user,
    refuse_media,
    refuse_misplaced,
)
from agentloop.providers.openai._responses_reply import PROVIDER
from agentloop.providers.openai.chat import prompt_cache_key
from agentloop.providers.profiles import ModelProfile, check_settings, merge_body, profile_for

__all__ = ["REASONING_SUMMARIES", "encode_request", "endpoint_origin"]

REASONING_SUMMARIES = ("auto", "concise", "detailed")
"""The ``reasoning.summary`` values the API takes."""

_WIRE_KEY = "openai-responses"
_INCLUDE = ("reasoning.encrypted_content",)


_ORG_HEADERS = ("openai-organization", "openai-project", "api-key")


def endpoint_origin(
    base_url: str, api_key: str | None, headers: Mapping[str, str] | None = None
) -> str:
    """Who can read this endpoint's ``encrypted_content``: ``<host>/<fingerprint>``.

    OpenAI verifies a reasoning item's blob against the organisation that wrote it, so another
    host (Azure's ``<resource>.openai.azure.com`` against api.openai.com, a proxy) or another
    key or ``OpenAI-Organization``/``OpenAI-Project`` header is another reader. The
    fingerprint is 16 hex digits of a SHA-256 over those values: it tells keys apart without
    revealing one (a rotated key of the same organisation counts as another, and its
    reasoning is left out: safe, if a little less informed).
    """
    wanted = {name.lower(): value for name, value in (headers or {}).items()}
    secret = "\0".join([api_key or "", *(wanted.get(name, "") for name in _ORG_HEADERS)])
    digest = hashlib.sha256(b"agentloop-origin\0" + secret.encode()).hexdigest()[:16]
    return f"{urlsplit(base_url).netloc.lower()}/{digest}"


def _arguments(arguments: Mapping[str, Any]) -> str:
    raw = arguments.get(INVALID_JSON_KEY)
    if len(arguments) == 1 and isinstance(raw, str):
        return raw
    return json.dumps(dict(arguments), ensure_ascii=False)


def _reasoning_item(part: ThinkingPart, origin: str | None) -> dict[str, Any] | None:
    """A reasoning item to send back, or None for a part this endpoint cannot read.

    Another provider's part, one without ``encrypted_content``, and one another endpoint or
    organisation wrote (its ``origin`` is not ``origin``: OpenAI answers 400
    ``invalid_encrypted_content``) are left out; a part of unknown origin is sent.
    """
    if part.provider != PROVIDER or part.signature is None:
        return None
    if part.origin is not None and origin is not None and part.origin != origin:
        return None
    if not part.id:
        raise TranscriptError(
            "an OpenAI reasoning part has a signature but no id (rs_...): it cannot be sent back"
        )
    summary = [{"type": "summary_text", "text": part.text}] if part.text else []
    return {
        "type": "reasoning",
        "id": part.id,
        "encrypted_content": part.signature,
        "summary": summary,
    }


def _text_item(text: str, phase: str | None) -> dict[str, Any]:
    """An assistant message item; its ``phase`` goes back as it came (OpenAI 2026 rule 7)."""
    item: dict[str, Any] = {"type": "message", "role": "assistant", "content": text}
    if phase is not None:
        item["phase"] = phase
    return item


def _assistant_items(message: Message, origin: str | None) -> tuple[dict[str, Any], ...]:
    items: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if not part.text:
                continue
            last = items[-1] if items else None
            if last is not None and last["type"] == "message":
                last["content"] += part.text
            else:
                items.append(_text_item(part.text, message.phase))
        elif isinstance(part, ToolCallPart):
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.id,
                    "name": part.name,
                    "arguments": _arguments(part.arguments),
                }
            )
        elif isinstance(part, ThinkingPart):
            item = _reasoning_item(part, origin)
            if item is not None:
                items.append(item)
        else:
            other = _other_item(part, message)
            if other is not None:
                items.append(other)
    return tuple(items)


def _other_item(part: object, message: Message) -> dict[str, Any] | None:
    """Our own hosted call item, as received (its result lives in it); media cannot go here."""
    if isinstance(part, ProviderToolCallPart):
        return dict(part.raw) if part.provider == PROVIDER and part.raw is not None else None
    if isinstance(part, ProviderToolResultPart) and part.provider == PROVIDER and part.raw:
        return dict(part.raw) if part.raw.get("type") == "tool_search_output" else None
    if isinstance(part, ProviderToolResultPart | ProviderPart):  # another's block: never sent
        return None
    if isinstance(part, MEDIA):
        refuse_misplaced(message)
    raise _cannot_send(part)


def _cannot_send(part: object) -> ConfigurationError:
    """A part that has no place in its message (a tool result in a user message, ...)."""
    return ConfigurationError(
        f"the OpenAI Responses API adapter cannot send a {type(part).__name__} there",
        field="messages",
    )


def _encode_message(message: Message, origin: str | None = None) -> ResponsesWire:
    """One agentloop message as its input items and the media they carry.

    System messages go to ``instructions`` (``encode_request``), so they have no items here.
    ``origin`` is the target endpoint's identity (reasoning from elsewhere is left out).
    """
    if message.role == "assistant":
        return _assistant_items(message, origin), ()
    if message.role == "tool":
        return encode_tool_results(message)
    if message.role == "user":
        media = False
        for part in message.parts:
            if isinstance(part, TextPart):
                continue
            if not isinstance(part, MEDIA):
                raise _cannot_send(part)
            media = True
        if media:
            return encode_user(message)
        return ({"type": "message", "role": "user", "content": message.text},), ()
    return (), ()


def _developer(text: str) -> dict[str, Any]:
    """A ``developer`` message item: a system entry in place (SPEC 28)."""
    return {"type": "message", "role": "developer", "content": text}


def _tool(spec: ToolSpec, strict: bool) -> dict[str, Any]:
    """A function tool; ``strict`` is always said (this API takes an unmarked tool as strict)."""
    schema = strict_schema(spec.parameters) if strict else None
    data = {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": dict(schema.schema if schema else spec.parameters),
        "strict": schema.strict if schema else False,
    }
    if spec.defer_loading:  # found by the hosted tool search (SPEC 22)
        data["defer_loading"] = True
    return data


def _text_format(output: OutputSpec, strict: bool) -> dict[str, Any]:
    schema = strict_schema(output.schema) if strict else None
    return {
        "format": {
            "type": "json_schema",
            "name": output.name,
            "schema": dict(schema.schema if schema else output.schema),
            "strict": schema.strict if schema else False,
        }
    }


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "name": choice}


def _apply_settings(
    payload: dict[str, Any],
    settings: ModelSettings,
    model: str,
    profile: ModelProfile,
    summary: str | None,
) -> None:
    """The settings' fields, each checked before anything is sent (``ConfigurationError``)."""
    for name in ("seed", "stop"):
        if getattr(settings, name) is not None:
            raise ConfigurationError(
                f"the OpenAI Responses API has no {name}; drop ModelSettings.{name}, or use "
                "Chat Completions (Settings(api='chat') or OpenAIClient)",
                field=name,
            )
    check_settings(profile, model, settings)
    optional: dict[str, Any] = {
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "max_output_tokens": settings.max_tokens or profile.max_output_tokens,
        "tool_choice": _tool_choice(settings.tool_choice) if settings.tool_choice else None,
    }
    payload.update({key: value for key, value in optional.items() if value is not None})
    effort = settings.reasoning_effort
    if effort is not None:
        reasoning: dict[str, str] = {"effort": effort}
        if effort != "none" and summary is not None:
            reasoning["summary"] = summary
        payload["reasoning"] = reasoning
    if settings.extra_body:
        merge_body(payload, settings.extra_body)


def _input_items(
    request: ModelRequest,
    name: str,
    profile: ModelProfile,
    origin: str | None,
    system: list[str],
) -> list[dict[str, Any]]:
    """The input items of the transcript (leading system messages' text added to ``system``).

    A system message after the first other one (an append-only conversation's entry, SPEC 28)
    is a ``developer`` message item in its place.
    """
    items: list[dict[str, Any]] = []
    key, encode = _WIRE_KEY, _encode_message
    if origin is not None:
        key, encode = f"{_WIRE_KEY}@{origin}", partial(_encode_message, origin=origin)
    for message in request.messages:
        if message.role == "system":
            refuse_misplaced(message)
            if not items:
                system.append(message.text)
            elif message.text:
                items.append(_developer(message.text))
            continue
        encoded, media = message.encoded(key, encode)
        if media:
            refuse_media(media, profile.media, name)
        items.extend(encoded)
    return items


def encode_request(
    request: ModelRequest,
    model: str,
    *,
    stream: bool = False,
    include_reasoning: bool = False,
    reasoning_summary: str | None = "auto",
    cache_key: bool = False,
    profile: ModelProfile | None = None,
    origin: str | None = None,
) -> dict[str, Any]:
    """The Responses API payload for ``request`` (each message encoded once, then reused).

    ``origin`` is the endpoint's identity (``endpoint_origin``): reasoning parts another
    endpoint wrote are left out; None sends every OpenAI reasoning part.

    Raises:
        ConfigurationError: A setting or a media part the model or this API cannot take.
        TranscriptError: A reasoning part that cannot be sent back.
    """
    request = with_tool_changes(request)  # SPEC 28: an entry's tool change joins tools
    name = request.model or model
    profile = profile or profile_for(PROVIDER, name)
    system = [request.system] if request.system else []
    items = _input_items(request, name, profile, origin, system)
    payload: dict[str, Any] = {"model": name, "input": items, "store": False}
    if include_reasoning:
        payload["include"] = list(_INCLUDE)
    if system:
        payload["instructions"] = "\n\n".join(text for text in system if text)
    if request.tools:
        payload["tools"] = [_tool(spec, profile.strict_schema) for spec in request.tools]
        if any(spec.defer_loading for spec in request.tools):
            payload["tools"].append(dict(RESPONSES_SEARCH_TOOL))
    if request.provider_tools:
        hosted.check_responses(request.provider_tools, name, functions=bool(request.tools))
        payload.setdefault("tools", []).extend(hosted.encode_tools(request.provider_tools))
    if stream:
        payload["stream"] = True
    if request.output is not None:
        payload["text"] = _text_format(request.output, profile.strict_schema)
    if cache_key and request.settings.cache and request.session_id:
        payload["prompt_cache_key"] = prompt_cache_key(request.session_id)
    _apply_settings(payload, request.settings, name, profile, reasoning_summary)
    return payload
