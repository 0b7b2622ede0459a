"""OpenAI's Responses API, the one OpenAI recommends for its reasoning models (SPEC 16).

``OpenAIResponsesClient`` implements ``ModelClient`` over ``POST {base_url}/responses``, as one
JSON reply and as an SSE stream. No state lives on OpenAI's side: every request says
``store: false`` and carries the whole transcript, reasoning included, so a new process, a
second worker, a resume or a fallback sends the same request as the client that started.

Request mapping:

- ``ModelRequest.system`` and any ``system`` messages become ``instructions``; a user message is
  an input ``message``; an assistant message becomes, part by part and in order, a ``reasoning``
  item for each of this provider's ``ThinkingPart`` s (``id`` = the part's ``rs_...`` id,
  ``encrypted_content`` = its signature, ``summary`` = its text), an assistant ``message`` for
  its text and a ``function_call`` (``call_id``, ``name``, JSON ``arguments``; a call whose
  arguments were invalid JSON sends the raw text back) per tool call; a tool message becomes one
  ``function_call_output`` per result. So a reasoning item always travels right before the calls
  it preceded, as the API requires.
- Reasoning parts of other providers are never sent. An OpenAI part without a signature (a
  server that sent no ``encrypted_content``) cannot be resolved with ``store: false`` and is
  not sent either; one with a signature but no id is a ``TranscriptError``.
- ``include: ["reasoning.encrypted_content"]`` goes to models that reason (the model profile
  says so; ``encrypted_reasoning=`` overrides): OpenAI answers 400 "Encrypted content is not
  supported with this model." to the others.
- ``ModelSettings``: ``temperature``, ``top_p``, ``max_tokens`` (as ``max_output_tokens``) and
  ``reasoning_effort`` (as ``reasoning.effort``) are checked against the model's profile first
  (``profiles.check_settings``: a refused setting is a ``ConfigurationError`` before sending);
  ``seed`` and ``stop``, which this API has no place for, are a ``ConfigurationError`` too. An
  effort other than ``"none"`` also asks for ``reasoning.summary`` (``reasoning_summary=``,
  ``"auto"`` by default; ``None`` for an organisation OpenAI has not verified, which it refuses
  summaries). ``tool_choice`` is ``auto``/``required``/``none`` or a function's name;
  ``extra_body`` merges in last (``profiles.merge_body``, recursively).
- Tools are function tools, and a tool's schema and native structured output (``text.format``
  ``json_schema``) are sent ``strict`` exactly when the schema already meets strict mode's rules
  (every object closed with ``additionalProperties: false`` and requiring all its properties):
  this API treats an unmarked tool as strict, which a looser schema fails with a 400.
- With ``ModelSettings.cache`` and a session, api.openai.com also gets ``prompt_cache_key``
  (``openai.prompt_cache_key``).

What a reply becomes, errors included, is in ``_responses_reply``.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from agentloop.errors import ConfigurationError, TranscriptError
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.model import (
    INVALID_JSON_KEY,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSpec,
    StreamEvent,
    ToolSpec,
)
from agentloop.providers._client import HttpClient, check_client, check_key_characters
from agentloop.providers._responses_reply import (
    PROVIDER,
    ResponsesStream,
    failure,
    parse_response,
)
from agentloop.providers.openai import prompt_cache_key
from agentloop.providers.profiles import ModelProfile, check_settings, merge_body, profile_for

__all__ = [
    "REASONING_SUMMARIES",
    "OpenAIResponsesClient",
    "ResponsesStream",
    "encode_request",
    "failure",
    "parse_response",
    "strict_ready",
]

REASONING_SUMMARIES = ("auto", "concise", "detailed")
"""The ``reasoning.summary`` values the API takes."""

_WIRE_KEY = "openai-responses"
_INCLUDE = ("reasoning.encrypted_content",)
_CACHE_KEY_HOSTS = frozenset({"api.openai.com"})


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
        else:
            raise _cannot_send(part)
    return tuple(items)


def _cannot_send(part: object) -> ConfigurationError:
    """A part this adapter has no encoding for (media parts belong to the media work)."""
    return ConfigurationError(
        f"the OpenAI Responses API adapter cannot send a {type(part).__name__} yet",
        field="messages",
    )


def _encode_message(message: Message) -> tuple[dict[str, Any], ...]:
    """One agentloop message as its input items (system messages go to ``instructions``)."""
    if message.role == "assistant":
        return _assistant_items(message)
    if message.role == "tool":
        return tuple(
            {"type": "function_call_output", "call_id": part.call_id, "output": part.content}
            for part in message.parts
            if isinstance(part, ToolResultPart)
        )
    if message.role == "user":
        for part in message.parts:
            if not isinstance(part, TextPart):
                raise _cannot_send(part)
        return ({"type": "message", "role": "user", "content": message.text},)
    return ()


def strict_ready(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` already meets strict mode's rules (provider-rules OpenAI 5).

    Every object schema (``type: object`` or with ``properties``) must say
    ``additionalProperties: false`` and require every property. The walk is iterative, so no
    schema is too deep for it; anything it does not recognise is left to the provider.
    """
    stack: list[object] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, Mapping):
            continue
        properties = node.get("properties")
        if node.get("type") == "object" or isinstance(properties, Mapping):
            names = set(properties) if isinstance(properties, Mapping) else set()
            required = node.get("required")
            if node.get("additionalProperties") is not False:
                return False
            if not isinstance(required, list) or set(required) != names:
                return False
        stack.extend(node.values())
    return True


_STRICT_CACHE: dict[int, tuple[object, dict[str, Any]]] = {}
_STRICT_CACHE_SIZE = 512


def _cached(key: Any, build: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """``build(key)`` once per spec object: a run advertises the same specs every turn."""
    hit = _STRICT_CACHE.get(id(key))
    if hit is not None and hit[0] is key:
        return hit[1]
    if len(_STRICT_CACHE) >= _STRICT_CACHE_SIZE:
        _STRICT_CACHE.clear()
    value: dict[str, Any] = build(key)
    _STRICT_CACHE[id(key)] = (key, value)
    return value


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": dict(spec.parameters),
        "strict": strict_ready(spec.parameters),
    }


def _text_format(output: OutputSpec) -> dict[str, Any]:
    return {
        "format": {
            "type": "json_schema",
            "name": output.name,
            "schema": dict(output.schema),
            "strict": strict_ready(output.schema),
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
        ConfigurationError: A setting the model or this API cannot take.
        TranscriptError: A reasoning part that cannot be sent back.
    """
    name = request.model or model
    items: list[dict[str, Any]] = []
    system = [request.system] if request.system else []
    for message in request.messages:
        if message.role == "system":
            system.append(message.text)
        items.extend(message.encoded(_WIRE_KEY, _encode_message))
    payload: dict[str, Any] = {"model": name, "input": items, "store": False}
    if include_reasoning:
        payload["include"] = list(_INCLUDE)
    if system:
        payload["instructions"] = "\n\n".join(text for text in system if text)
    if request.tools:
        payload["tools"] = [_cached(spec, _tool) for spec in request.tools]
    if stream:
        payload["stream"] = True
    if request.output is not None:
        payload["text"] = _cached(request.output, _text_format)
    if cache_key and request.settings.cache and request.session_id:
        payload["prompt_cache_key"] = prompt_cache_key(request.session_id)
    profile = profile or profile_for(PROVIDER, name)
    _apply_settings(payload, request.settings, name, profile, reasoning_summary)
    return payload


class OpenAIResponsesClient(HttpClient):
    """``ModelClient`` for OpenAI's Responses API (and servers that speak it, e.g. LiteLLM)."""

    default_base_url = "https://api.openai.com/v1"
    default_provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        provider: str | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        proxy: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        encrypted_reasoning: bool | None = None,
        reasoning_summary: str | None = "auto",
    ) -> None:
        """Configure the client; nothing is sent until the first request.

        Args:
            model: The default model name (``ModelRequest.model`` overrides it per request).
            api_key: Sent as ``Authorization: Bearer``; never shown in errors or reprs.
            base_url: API root up to ``/v1``; api.openai.com when None.
            provider: Name stamped on errors and responses (``"openai"`` when None).
            timeout: Read/idle-gap timeout in seconds.
            connect_timeout: Connect timeout in seconds.
            headers: Extra headers on every request.
            proxy: An ``http://`` proxy URL.
            ssl_context: Custom TLS context (e.g. a private CA).
            encrypted_reasoning: Ask for ``reasoning.encrypted_content``; None decides by the
                model's profile (reasoning models only: the others refuse it).
            reasoning_summary: ``reasoning.summary`` sent with a ``reasoning_effort``
                (``"auto"``, ``"concise"``, ``"detailed"``), or None to ask for none.
        """
        check_client(model, base_url or self.default_base_url, timeout, connect_timeout)
        if api_key:
            check_key_characters(api_key)
        if reasoning_summary is not None and reasoning_summary not in REASONING_SUMMARIES:
            raise ConfigurationError(
                f"reasoning_summary must be one of {REASONING_SUMMARIES} or None, "
                f"got {reasoning_summary!r}",
                field="reasoning_summary",
            )
        if encrypted_reasoning is not None and not isinstance(encrypted_reasoning, bool):
            raise ConfigurationError(
                f"encrypted_reasoning must be a bool or None, got {encrypted_reasoning!r}",
                field="encrypted_reasoning",
            )
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self._cache_key = (urlsplit(self.base_url).hostname or "") in _CACHE_KEY_HOSTS
        self._encrypted = encrypted_reasoning
        self._summary = reasoning_summary
        self._profiles: dict[str, ModelProfile] = {}
        all_headers = dict(headers or {})
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        self._configure(
            model,
            provider or self.default_provider,
            headers=all_headers,
            key=api_key,
            timeout=timeout,
            connect_timeout=connect_timeout,
            proxy=proxy,
            ssl_context=ssl_context,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self._model!r}, provider={self._provider!r}, "
            f"base_url={self.base_url!r})"
        )

    @property
    def url(self) -> str:
        """The Responses endpoint."""
        return f"{self.base_url}/responses"

    def _profile(self, model: str) -> ModelProfile:
        profile = self._profiles.get(model)
        if profile is None:
            profile = self._profiles[model] = profile_for(PROVIDER, model)
        return profile

    def _payload(self, request: ModelRequest, stream: bool) -> dict[str, Any]:
        profile = self._profile(request.model or self._model)
        include = self._encrypted
        if include is None:
            include = profile.thinks_by_default or bool(profile.efforts)
        return encode_request(
            request,
            self._model,
            stream=stream,
            include_reasoning=include,
            reasoning_summary=self._summary,
            cache_key=self._cache_key,
            profile=profile,
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the complete reply."""
        reply = await self._transport.post_json(self.url, self._payload(request, False))
        with self._redacting():
            return parse_response(
                reply.data,
                reply.text,
                provider=self._provider,
                model=request.model or self._model,
                request_id=reply.request_id,
                redactor=self._transport.redact,
            )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream ``request``: text, reasoning and tool-call deltas, then ``done``."""
        payload = self._payload(request, True)
        state = ResponsesStream(
            provider=self._provider,
            model=request.model or self._model,
            secrets=self._transport.secrets,
        )
        with self._redacting():
            async with self._transport.stream_sse(self.url, payload) as events:
                state.request_id = events.request_id
                async for event in events:  # drained to the end so the connection is reused
                    if not state.finished:
                        for delta in state.feed(event.data):
                            yield delta
            response = state.response()
        yield StreamEvent("done", response=response)
