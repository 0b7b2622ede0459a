"""OpenAI Chat Completions, and every server that speaks it (OpenRouter, Ollama, vLLM, llama.cpp).

``OpenAIClient`` implements ``ModelClient`` over ``POST {base_url}/chat/completions``, both as one
JSON reply and as an SSE stream. ``OpenRouterClient`` and ``OllamaClient`` are the same adapter
with another default ``base_url``/``provider`` (and no key for Ollama).

Wire mapping:

- ``ModelRequest.system`` becomes the first ``system`` message; agentloop messages are encoded
  once each (``Message.encoded``): the one ``tool`` message of a turn becomes one ``role: tool``
  wire message per ``ToolResultPart`` (the soft-error flag has no wire field: the text says it);
  an assistant message carries ``tool_calls`` with JSON-encoded arguments.
- ``ModelSettings``: ``temperature``, ``top_p``, ``stop``, ``seed`` as is; ``max_tokens`` as
  ``max_completion_tokens`` on api.openai.com and ``max_tokens`` elsewhere (override with
  ``max_tokens_field``); ``tool_choice`` ``auto``/``required``/``none`` as is, any other value
  names a function; ``extra_body`` is merged into the payload last.
- Streaming sends ``stream: true`` and ``stream_options: {include_usage: true}``. Deltas of
  choice 0 are accumulated: text (a ``refusal`` counts as text) and tool calls keyed by their
  ``index`` (fragments of arguments are joined; parallel calls stay apart; a new id on a used
  index is a new call, see ``ChatStreamAccumulator``). A stream is complete
  only when ``data: [DONE]`` arrives; one that ends before it raises ``ResponseInvalid`` and is
  never returned as an answer. The last ``StreamEvent`` is ``done`` with the full
  ``ModelResponse``.
- ``ModelResponse.stop_reason`` is the provider's ``finish_reason`` string (``stop``,
  ``tool_calls``, ``length``, ``content_filter``...), ``usage`` maps ``prompt_tokens`` /
  ``completion_tokens`` (``input_tokens`` includes cached tokens, as ``prompt_tokens`` does),
  ``prompt_tokens_details.cached_tokens`` / ``.cache_write_tokens`` (OpenRouter) to
  ``cache_read_tokens`` / ``cache_write_tokens``; ``request_id`` comes from ``x-request-id``.
- Prompt caching is automatic on these servers; with ``ModelSettings.cache`` (the default) and a
  ``ModelRequest.session_id``, api.openai.com and openrouter.ai also get ``prompt_cache_key``
  (``agentloop-`` + 32 hex digits of the session id's SHA-256: stable per session, reveals
  nothing) so one session's requests land on the same cache. Other servers never see the field.
- An ``{"error": ...}`` object in a 200 body or mid-stream (OpenRouter, proxies) is classified
  like an HTTP error with the status its ``code`` names (else 500, i.e. ``ProviderUnavailable``).

Invalid tool-argument JSON: when a tool call's ``arguments`` text is not a JSON object (bad JSON,
or JSON that is not an object), the ``ToolCallPart`` carries ``arguments ==
{"__invalid_json__": "<the raw text as the model sent it>"}`` (``INVALID_JSON_KEY``), so the
engine answers with a soft "Invalid arguments" result instead of failing the run. An empty
string or null means no arguments (``{}``); an object (some compatible servers send one) is taken
as is, in both paths. Every other field is read through ``_wire`` (a wrong shape is
``ResponseInvalid``, the same in ``complete()`` and ``stream()``). When such a call is sent back
in the transcript, the raw text is sent verbatim as the call's ``arguments``.
"""

from __future__ import annotations

import hashlib
import json
import ssl
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from agentloop.errors import ProviderError, ResponseInvalid
from agentloop.messages import Message, Part, TextPart, ToolCallPart, ToolResultPart, Usage
from agentloop.model import (
    INVALID_JSON_KEY,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamEvent,
    ToolSpec,
)
from agentloop.providers._classify import error_for_status, invalid_body
from agentloop.providers._client import HttpClient, check_client, check_key_characters
from agentloop.providers._http import HttpTransport
from agentloop.providers._wire import (
    WireError,
    as_count,
    as_index,
    as_list,
    as_object,
    dumps,
    loads,
    nonempty_str,
    opt_object,
    opt_str,
    wrong,
)
from agentloop.safety.redact import redact_secrets

__all__ = [
    "INVALID_JSON_KEY",
    "ChatStreamAccumulator",
    "OllamaClient",
    "OpenAIClient",
    "OpenRouterClient",
    "decode_arguments",
    "encode_request",
    "parse_completion",
    "prompt_cache_key",
]

_WIRE_KEY = "openai-chat"
_DONE = "[DONE]"


def decode_arguments(raw: str) -> dict[str, Any]:
    """Decode a tool call's argument text (the ``INVALID_JSON_KEY`` convention on failure)."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # too deep to decode is as invalid as bad JSON
        return {INVALID_JSON_KEY: raw}
    return value if isinstance(value, dict) else {INVALID_JSON_KEY: raw}


def _encode_arguments(arguments: Mapping[str, Any]) -> str:
    raw = arguments.get(INVALID_JSON_KEY)
    if len(arguments) == 1 and isinstance(raw, str):
        return raw
    return json.dumps(dict(arguments), ensure_ascii=False)


def _encode_message(message: Message) -> list[dict[str, Any]]:
    """One agentloop message as its Chat Completions wire messages."""
    if message.role == "tool":
        return [
            {"role": "tool", "tool_call_id": part.call_id, "content": part.content}
            for part in message.parts
            if isinstance(part, ToolResultPart)
        ]
    if message.role != "assistant":
        return [{"role": message.role, "content": message.text}]
    # content is "" rather than null beside tool calls: llama.cpp's server rejects null
    wire: dict[str, Any] = {"role": "assistant", "content": message.text}
    calls = message.tool_calls
    if calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": _encode_arguments(call.arguments)},
            }
            for call in calls
        ]
    return [wire]


def _encode_tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": dict(spec.parameters),
        },
    }


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _apply_settings(payload: dict[str, Any], settings: ModelSettings, max_field: str) -> None:
    optional: dict[str, Any] = {
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "seed": settings.seed,
        max_field: settings.max_tokens,
        "stop": list(settings.stop) if settings.stop is not None else None,
        "tool_choice": _tool_choice(settings.tool_choice) if settings.tool_choice else None,
    }
    payload.update({key: value for key, value in optional.items() if value is not None})
    if settings.extra_body:
        payload.update(settings.extra_body)


_CACHE_KEY_HOSTS = frozenset({"api.openai.com", "openrouter.ai"})
"""Servers that accept ``prompt_cache_key`` (others may reject unknown fields)."""


def prompt_cache_key(session_id: str) -> str:
    """The ``prompt_cache_key`` of a session: stable, at most 64 characters, no user data."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return "agentloop-" + digest[:32]


def encode_request(
    request: ModelRequest,
    model: str,
    *,
    stream: bool = False,
    max_field: str = "max_tokens",
    cache_key: bool = False,
) -> dict[str, Any]:
    """The Chat Completions payload for ``request`` (each message encoded once, then reused).

    ``cache_key``: the server accepts ``prompt_cache_key`` (sent when caching is on and the
    request has a session).
    """
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        messages.extend(message.encoded(_WIRE_KEY, _encode_message))
    payload: dict[str, Any] = {"model": request.model or model, "messages": messages}
    if request.tools:
        payload["tools"] = [_encode_tool(spec) for spec in request.tools]
    if stream:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
    if request.output is not None:  # native structured output (RunConfig.output_mode="native")
        payload["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": request.output.name,
                "schema": dict(request.output.schema),
                "strict": False,
            },
        }
    if cache_key and request.settings.cache and request.session_id:
        payload["prompt_cache_key"] = prompt_cache_key(request.session_id)
    _apply_settings(payload, request.settings, max_field)
    return payload


def _invalid(message: str, body: str, provider: str, request_id: str | None) -> ResponseInvalid:
    return invalid_body(message, body, provider, request_id)


def _payload_error(
    data: Mapping[str, Any], text: str, provider: str, request_id: str | None
) -> ProviderError | None:
    """An ``{"error": ...}`` object inside a 2xx body or a stream chunk, classified."""
    error = data.get("error")
    if not error:
        return None
    code = error.get("code") if isinstance(error, dict) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    result = error_for_status(status, {}, text, provider=provider)
    result.request_id = request_id
    return result


def _usage(value: object) -> Usage:
    usage = opt_object(value, "usage")
    details = opt_object(usage.get("prompt_tokens_details"), "usage.prompt_tokens_details")
    return Usage(
        as_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
        as_count(usage.get("completion_tokens"), "usage.completion_tokens"),
        as_count(details.get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens"),
        as_count(
            details.get("cache_write_tokens"), "usage.prompt_tokens_details.cache_write_tokens"
        ),
    )


def _argument_text(value: object, path: str) -> str:
    """A call's ``arguments``: the JSON text; an object (sent by some servers) is re-encoded."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, dict):
        return dumps(value, path)
    raise wrong(path, "a string or an object", value)


def _parse_call(value: object, index: int) -> ToolCallPart:
    path = f"choices[0].message.tool_calls[{index}]"
    call = as_object(value, path)
    function = as_object(call.get("function"), f"{path}.function")
    name = nonempty_str(function.get("name"), f"{path}.function.name")
    raw = _argument_text(function.get("arguments"), f"{path}.function.arguments")
    call_id = opt_str(call.get("id"), f"{path}.id") or f"call_{index}"
    return ToolCallPart(call_id, name, decode_arguments(raw))


def _parse_message(value: object) -> Message:
    message = as_object(value, "choices[0].message")
    content = opt_str(message.get("content"), "choices[0].message.content")
    refusal = opt_str(message.get("refusal"), "choices[0].message.refusal")
    text = content or refusal
    parts: list[Part] = [TextPart(text)] if text else []
    calls = as_list(message.get("tool_calls"), "choices[0].message.tool_calls")
    parts.extend(_parse_call(call, index) for index, call in enumerate(calls))
    return Message("assistant", tuple(parts))


def _completion(data: object, model: str, request_id: str | None) -> ModelResponse:
    """The typed read of a chat completion body; a wrong shape raises ``WireError``."""
    body = as_object(data, "body")
    choices = as_list(body.get("choices"), "choices")
    if not choices:
        raise WireError("choices", "expected at least one choice")
    choice = as_object(choices[0], "choices[0]")
    message = _parse_message(choice.get("message"))
    return ModelResponse(
        message=message,
        usage=_usage(body.get("usage")),
        model=opt_str(body.get("model"), "model") or model,
        stop_reason=opt_str(choice.get("finish_reason"), "choices[0].finish_reason") or None,
        request_id=request_id,
    )


def parse_completion(
    data: object,
    text: str,
    *,
    provider: str,
    model: str,
    request_id: str | None = None,
    redactor: Callable[[str], str] | None = None,
) -> ModelResponse:
    """A non-streaming Chat Completions body as a ``ModelResponse`` (``ResponseInvalid`` else).

    ``redactor`` cleans ``text`` before it is kept on an error; successful replies skip it.
    """
    if isinstance(data, dict) and data.get("error"):
        error = _payload_error(data, redactor(text) if redactor else text, provider, request_id)
        if error is not None:
            raise error
    try:
        return _completion(data, model, request_id)
    except WireError as exc:
        raise _invalid(
            f"{provider}: the reply is not a chat completion ({exc})",
            redactor(text) if redactor is not None else text,
            provider,
            request_id,
        ) from exc


_CALL = "choices[].delta.tool_calls[]"  # constant paths: no formatting on the hot path


@dataclass(slots=True)
class _StreamedCall:
    """One tool call being streamed: its id, name and argument fragments so far."""

    id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)


class ChatStreamAccumulator:
    """Folds Chat Completions stream chunks (choice 0) into deltas and one final response.

    Tool-call fragments go to lanes, in order of first appearance: a fragment joins the lane of
    its ``index``, unless it carries an id different from the one that lane already has (two
    calls sent under one index stay two calls). Without an ``index``, a new id opens a new lane
    and a fragment without an id continues the last one. ``StreamEvent.index`` is the lane.
    """

    def __init__(self, *, provider: str, model: str, secrets: Sequence[str] = ()) -> None:
        self.provider = provider
        self.model = model
        self.secrets = tuple(secrets)
        self.request_id: str | None = None
        self.done = False
        self.events_seen = 0
        self._text: list[str] = []
        self._calls: list[_StreamedCall] = []
        self._lanes: dict[int, int] = {}
        self._finish: str | None = None
        self._usage = Usage()

    def feed(self, data: str) -> list[StreamEvent]:
        """One SSE ``data`` payload; returns the deltas it carries."""
        self.events_seen += 1
        if not data.strip():
            return []
        if data.strip() == _DONE:
            self.done = True
            return []
        try:
            return self._chunk(loads(data, "stream chunk"), data)
        except WireError as exc:
            raise self._bad(f"malformed stream chunk ({exc})", data) from exc

    def _chunk(self, value: object, data: str) -> list[StreamEvent]:
        chunk = as_object(value, "stream chunk")
        if chunk.get("error"):
            error = _payload_error(
                chunk, redact_secrets(data, self.secrets), self.provider, self.request_id
            )
            if error is not None:
                raise error
        self.model = opt_str(chunk.get("model"), "model") or self.model
        usage = chunk.get("usage")
        if usage is not None and usage != {}:
            self._usage = _usage(usage)
        return self._choices(as_list(chunk.get("choices"), "choices"))

    def _choices(self, choices: Iterable[Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for value in choices:
            choice = as_object(value, "choices[]")
            if as_index(choice.get("index"), "choices[].index"):
                continue  # only choice 0 (a missing index means 0)
            finish = opt_str(choice.get("finish_reason"), "choices[].finish_reason")
            self._finish = finish or self._finish
            delta = opt_object(choice.get("delta"), "choices[].delta")
            content = opt_str(delta.get("content"), "choices[].delta.content")
            refusal = opt_str(delta.get("refusal"), "choices[].delta.refusal")
            text = content or refusal
            if text:
                self._text.append(text)
                events.append(StreamEvent("text_delta", text=text))
            for call in as_list(delta.get("tool_calls"), "choices[].delta.tool_calls"):
                events.append(self._tool_delta(as_object(call, _CALL)))
        return events

    def _tool_delta(self, call: Mapping[str, Any]) -> StreamEvent:
        call_id = opt_str(call.get("id"), _CALL + ".id") or None
        function = opt_object(call.get("function"), _CALL + ".function")
        name = opt_str(function.get("name"), _CALL + ".function.name")
        fragment = _argument_text(function.get("arguments"), _CALL + ".function.arguments")
        lane = self._lane(as_index(call.get("index"), _CALL + ".index"), call_id)
        state = self._calls[lane]
        state.id = state.id or call_id or ""
        state.name = state.name or name or ""
        state.fragments.append(fragment)
        return StreamEvent(
            "tool_call_delta", index=lane, call_id=call_id, name=name, arguments=fragment
        )

    def _lane(self, index: int | None, call_id: str | None) -> int:
        """The lane of a fragment (see the class docstring)."""
        if index is None:
            known = [lane for lane, c in enumerate(self._calls) if call_id and c.id == call_id]
            if known:
                return known[0]
            if call_id or not self._calls:
                return self._new_lane()
            return len(self._calls) - 1
        lane = self._lanes.get(index)
        if lane is None or (call_id and self._calls[lane].id not in ("", call_id)):
            lane = self._lanes[index] = self._new_lane()
        return lane

    def _new_lane(self) -> int:
        self._calls.append(_StreamedCall())
        return len(self._calls) - 1

    def _bad(self, message: str, body: str) -> ResponseInvalid:
        text = redact_secrets(body, self.secrets)
        return _invalid(f"{self.provider}: {message}", text, self.provider, self.request_id)

    def response(self) -> ModelResponse:
        """The complete reply; ``ResponseInvalid`` when ``[DONE]`` never arrived."""
        if not self.done:
            raise self._bad(
                f"stream ended without [DONE] after {self.events_seen} events (truncated?)",
                "".join(self._text),
            )
        parts: list[Part] = [TextPart("".join(self._text))] if self._text else []
        for lane, call in enumerate(self._calls):
            raw = "".join(call.fragments)
            if not call.name:
                raise self._bad(f"streamed tool call {lane} has no name", raw)
            parts.append(ToolCallPart(call.id or f"call_{lane}", call.name, decode_arguments(raw)))
        return ModelResponse(
            message=Message("assistant", tuple(parts)),
            usage=self._usage,
            model=self.model,
            stop_reason=self._finish,
            request_id=self.request_id,
        )


class OpenAIClient(HttpClient):
    """``ModelClient`` for OpenAI Chat Completions and OpenAI-compatible servers."""

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
        max_tokens_field: str | None = None,
    ) -> None:
        """Configure the client; nothing is sent until the first request.

        Args:
            model: The default model name (``ModelRequest.model`` overrides it per request).
            api_key: Sent as ``Authorization: Bearer``; never shown in errors or reprs.
            base_url: API root up to ``/v1``; the class default when None.
            provider: Name stamped on errors and responses; the class default when None.
            timeout: Read/idle-gap timeout in seconds.
            connect_timeout: Connect timeout in seconds.
            headers: Extra headers on every request (e.g. OpenRouter's ``HTTP-Referer``).
            proxy: An ``http://`` proxy URL.
            ssl_context: Custom TLS context (e.g. a private CA).
            max_tokens_field: Wire name for ``ModelSettings.max_tokens``; None picks
                ``max_completion_tokens`` for api.openai.com and ``max_tokens`` elsewhere.
        """
        check_client(model, base_url or self.default_base_url, timeout, connect_timeout)
        if api_key:
            check_key_characters(api_key)
        self._model = model
        self._provider = provider or self.default_provider
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        host = urlsplit(self.base_url).hostname or ""
        self._max_field = max_tokens_field or (
            "max_completion_tokens" if host == "api.openai.com" else "max_tokens"
        )
        self._cache_key = host in _CACHE_KEY_HOSTS
        all_headers = dict(headers or {})
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        self._transport = HttpTransport(
            provider=self._provider,
            timeout=timeout,
            connect_timeout=connect_timeout,
            headers=all_headers,
            secrets=(api_key,) if api_key else (),
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
        """The Chat Completions endpoint."""
        return f"{self.base_url}/chat/completions"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the complete reply."""
        payload = encode_request(
            request, self._model, max_field=self._max_field, cache_key=self._cache_key
        )
        reply = await self._transport.post_json(self.url, payload)
        return parse_completion(
            reply.data,
            reply.text,
            provider=self._provider,
            model=request.model or self._model,
            request_id=reply.request_id,
            redactor=self._transport.redact,
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream ``request``: text and tool-call deltas, then ``done`` with the full reply."""
        payload = encode_request(
            request,
            self._model,
            stream=True,
            max_field=self._max_field,
            cache_key=self._cache_key,
        )
        accumulator = ChatStreamAccumulator(
            provider=self._provider,
            model=request.model or self._model,
            secrets=self._transport.secrets,
        )
        async with self._transport.stream_sse(self.url, payload) as events:
            accumulator.request_id = events.request_id
            async for event in events:
                for delta in accumulator.feed(event.data):
                    yield delta
                if accumulator.done:
                    break
        yield StreamEvent("done", response=accumulator.response())


class OpenRouterClient(OpenAIClient):
    """OpenRouter's OpenAI-compatible API (402 means out of credits)."""

    default_base_url = "https://openrouter.ai/api/v1"
    default_provider = "openrouter"


class OllamaClient(OpenAIClient):
    """A local Ollama server's OpenAI-compatible API (no key needed)."""

    default_base_url = "http://localhost:11434/v1"
    default_provider = "ollama"
