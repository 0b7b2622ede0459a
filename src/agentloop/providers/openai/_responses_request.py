"""Encoding a request for OpenAI's Responses API: the transcript as input items, the settings.

Pure (no I/O): ``encode_request`` is the whole mapping, which ``responses.py`` documents and
re-exports. Each message is encoded once (``Message.encoded``: its items and the media parts
they carry, ``_responses_media``) and reused on later turns; carried media are checked against
the model on every request; tool and output schemas go through the strict-mode rewrite Chat
Completions uses (``_chat_strict``, cached per schema object).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentloop.errors import ConfigurationError, TranscriptError
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart
from agentloop.model import INVALID_JSON_KEY, ModelRequest, ModelSettings, OutputSpec, ToolSpec
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

__all__ = ["REASONING_SUMMARIES", "encode_request"]

REASONING_SUMMARIES = ("auto", "concise", "detailed")
"""The ``reasoning.summary`` values the API takes."""

_WIRE_KEY = "openai-responses"
_INCLUDE = ("reasoning.encrypted_content",)


def _arguments(arguments: Mapping[str, Any]) -> str:
    raw = arguments.get(INVALID_JSON_KEY)
    if len(arguments) == 1 and isinstance(raw, str):
        return raw
    return json.dumps(dict(arguments), ensure_ascii=False)


def _reasoning_item(part: ThinkingPart) -> dict[str, Any] | None:
    """A reasoning item to send back, or None for a part this API cannot take back."""
    if part.provider != PROVIDER or part.signature is None:
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


def _assistant_items(message: Message) -> tuple[dict[str, Any], ...]:
    items: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if not part.text:
                continue
            last = items[-1] if items else None
            if last is not None and last["type"] == "message":
                last["content"] += part.text
            else:
                items.append({"type": "message", "role": "assistant", "content": part.text})
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
            item = _reasoning_item(part)
            if item is not None:
                items.append(item)
        elif isinstance(part, MEDIA):
            refuse_misplaced(message)
        else:
            raise _cannot_send(part)
    return tuple(items)


def _cannot_send(part: object) -> ConfigurationError:
    """A part that has no place in its message (a tool result in a user message, ...)."""
    return ConfigurationError(
        f"the OpenAI Responses API adapter cannot send a {type(part).__name__} there",
        field="messages",
    )


def _encode_message(message: Message) -> ResponsesWire:
    """One agentloop message as its input items and the media they carry.

    System messages go to ``instructions`` (``encode_request``), so they have no items here.
    """
    if message.role == "assistant":
        return _assistant_items(message), ()
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


def _tool(spec: ToolSpec, strict: bool) -> dict[str, Any]:
    """A function tool; ``strict`` is always said (this API takes an unmarked tool as strict)."""
    schema = strict_schema(spec.parameters) if strict else None
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": dict(schema.schema if schema else spec.parameters),
        "strict": schema.strict if schema else False,
    }


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


def encode_request(
    request: ModelRequest,
    model: str,
    *,
    stream: bool = False,
    include_reasoning: bool = False,
    reasoning_summary: str | None = "auto",
    cache_key: bool = False,
    profile: ModelProfile | None = None,
) -> dict[str, Any]:
    """The Responses API payload for ``request`` (each message encoded once, then reused).

    Raises:
        ConfigurationError: A setting or a media part the model or this API cannot take.
        TranscriptError: A reasoning part that cannot be sent back.
    """
    name = request.model or model
    profile = profile or profile_for(PROVIDER, name)
    items: list[dict[str, Any]] = []
    system = [request.system] if request.system else []
    for message in request.messages:
        if message.role == "system":
            refuse_misplaced(message)
            system.append(message.text)
        encoded, media = message.encoded(_WIRE_KEY, _encode_message)
        if media:
            refuse_media(media, profile.media, name)
        items.extend(encoded)
    payload: dict[str, Any] = {"model": name, "input": items, "store": False}
    if include_reasoning:
        payload["include"] = list(_INCLUDE)
    if system:
        payload["instructions"] = "\n\n".join(text for text in system if text)
    if request.tools:
        payload["tools"] = [_tool(spec, profile.strict_schema) for spec in request.tools]
    if stream:
        payload["stream"] = True
    if request.output is not None:
        payload["text"] = _text_format(request.output, profile.strict_schema)
    if cache_key and request.settings.cache and request.session_id:
        payload["prompt_cache_key"] = prompt_cache_key(request.session_id)
    _apply_settings(payload, request.settings, name, profile, reasoning_summary)
    return payload
