"""The Anthropic Messages API adapter: agentloop messages in, ``ModelResponse`` out.

Speaks ``POST {base_url}/v1/messages`` through the shared ``HttpTransport`` (which classifies
every HTTP failure), both as one JSON reply and as SSE. Wire rules it owns:

- The system prompt (``request.system`` and any ``system`` messages) goes top-level.
- An agentloop ``tool`` message becomes one ``user`` message of ``tool_result`` blocks (with
  ``is_error``); consecutive same-role messages are merged, so a user text right after tool
  results joins that user message (results first, as the API requires). Empty text is dropped.
- ``ModelSettings`` are forwarded (``tool_choice``: ``auto``, ``required``/``any``, ``none`` or a
  tool name); ``seed`` or a temperature above 1 cannot be forwarded and raise
  ``ConfigurationError`` before sending.
- A stream is complete only at ``message_stop``; an ``error`` event becomes the matching
  ``ProviderError`` (``overloaded_error`` -> ``ProviderUnavailable``...), and a stream that ends
  without ``message_stop`` is ``ResponseInvalid``. Only closed content blocks survive into the
  final response; a tool block still open at the end (e.g. cut by ``max_tokens``) is dropped.
- Thinking, server-tool, compaction and other non-text, non-``tool_use`` blocks are ignored.
- Prompt caching (``ModelSettings.cache``, on by default): ``cache_control`` breakpoints, at most
  four: the last tool, the system prompt (then sent as one text block), the last block of the
  transcript (the next turn reads it) and the last block before the final assistant message
  (where the previous request ended, so a turn that adds many blocks still hits). Encoded
  messages are shared and never marked in place: a marked block is a copy. ``cache=False``
  sends the old payload byte for byte.
- ``Usage.input_tokens`` includes cache reads and writes (the prompt's real size);
  ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are kept as
  ``cache_read_tokens`` and ``cache_write_tokens``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentloop.errors import (
    AuthError,
    BadRequestError,
    ConfigurationError,
    ContextLengthExceeded,
    FailurePhase,
    InsufficientCredits,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    ResponseInvalid,
)
from agentloop.messages import Message, Part, TextPart, ToolCallPart, Usage
from agentloop.model import ModelRequest, ModelResponse, ModelSettings, StreamEvent
from agentloop.providers._classify import ErrorInfo, invalid_body, is_context_overflow
from agentloop.providers._client import HttpClient, check_client, require_key
from agentloop.providers._http import HttpTransport
from agentloop.providers._sse import SSEEvent
from agentloop.providers._wire import (
    WireError,
    as_count,
    as_index,
    as_object,
    loads,
    nonempty_str,
    opt_object,
    opt_str,
    wrong,
)

__all__ = [
    "ANTHROPIC_VERSION",
    "EPHEMERAL",
    "AnthropicClient",
    "AnthropicStreamState",
    "build_payload",
    "mark_transcript",
]

ANTHROPIC_VERSION = "2023-06-01"
_PROVIDER = "anthropic"
_ERROR_TYPES: dict[str, type[ProviderError]] = {
    "overloaded_error": ProviderUnavailable,
    "api_error": ProviderUnavailable,
    "rate_limit_error": RateLimited,
    "invalid_request_error": BadRequestError,
    "authentication_error": AuthError,
    "permission_error": AuthError,
    "not_found_error": ModelNotFound,
    "request_too_large": ContextLengthExceeded,
    "billing_error": InsufficientCredits,
    "timeout_error": ProviderTimeout,
}


def _invalid(message: str, body: str = "", request_id: str | None = None) -> ResponseInvalid:
    return invalid_body(f"anthropic: {message}", body, _PROVIDER, request_id)


# --- request encoding ------------------------------------------------------------------------


def _encode_part(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ToolCallPart):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": dict(part.arguments)}
    return {
        "type": "tool_result",
        "tool_use_id": part.call_id,
        "content": part.content,
        "is_error": part.is_error,
    }


def _encode_message(message: Message) -> tuple[str, tuple[dict[str, Any], ...]]:
    role = "assistant" if message.role == "assistant" else "user"
    blocks = (_encode_part(part) for part in message.parts)
    return role, tuple(block for block in blocks if block is not None)


def encode_messages(messages: list[Message] | tuple[Message, ...]) -> list[dict[str, Any]]:
    """The ``messages`` array: tool results as user blocks, same-role neighbours merged."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role, blocks = message.encoded(_PROVIDER, _encode_message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})
    return out


def _system_text(request: ModelRequest) -> str | None:
    texts = [request.system] if request.system else []
    texts.extend(m.text for m in request.messages if m.role == "system" and m.text)
    return "\n\n".join(texts) or None


def _tool_choice(choice: str) -> dict[str, Any]:
    fixed = {"auto": "auto", "required": "any", "any": "any", "none": "none"}
    if choice in fixed:
        return {"type": fixed[choice]}
    return {"type": "tool", "name": choice}


def _settings(settings: ModelSettings, max_tokens: int) -> dict[str, Any]:
    if settings.seed is not None:
        raise ConfigurationError("anthropic cannot forward ModelSettings.seed", field="seed")
    if settings.temperature is not None and settings.temperature > 1.0:
        raise ConfigurationError(
            f"anthropic accepts temperature in [0, 1], got {settings.temperature}",
            field="temperature",
        )
    out: dict[str, Any] = {"max_tokens": settings.max_tokens or max_tokens}
    if settings.temperature is not None:
        out["temperature"] = settings.temperature
    if settings.top_p is not None:
        out["top_p"] = settings.top_p
    if settings.stop:
        out["stop_sequences"] = list(settings.stop)
    if settings.tool_choice is not None:
        out["tool_choice"] = _tool_choice(settings.tool_choice)
    return out


EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}
"""The ``cache_control`` value of every breakpoint this adapter places."""


def _marked(block: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``block`` carrying a breakpoint (encoded blocks are shared: never mutate)."""
    return {**block, "cache_control": dict(EPHEMERAL)}


def mark_transcript(messages: list[dict[str, Any]]) -> None:
    """Breakpoints on the transcript's last block and where the previous request ended.

    The previous request ended at the last message before the final assistant message (the
    loop appends one assistant message and one user message of results per turn). Each wire
    message's content list is private to this payload, so replacing a block is safe.
    """
    if not messages:
        return
    ends = [len(messages) - 1]
    last_assistant = max(
        (i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None
    )
    if last_assistant is not None and last_assistant > 0:
        ends.append(last_assistant - 1)
    for index in set(ends):
        content = messages[index]["content"]
        content[-1] = _marked(content[-1])


def _encode_tools(request: ModelRequest, cache: bool) -> list[dict[str, Any]]:
    tools = [
        {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
        for t in request.tools
    ]
    if cache and tools:
        tools[-1] = _marked(tools[-1])
    return tools


def build_payload(
    request: ModelRequest, *, model: str, max_tokens: int, stream: bool
) -> dict[str, Any]:
    """The Messages API request body for ``request`` (raises ``ConfigurationError``)."""
    cache = request.settings.cache
    messages = encode_messages(tuple(request.messages))
    if cache:
        mark_transcript(messages)
    payload: dict[str, Any] = {"model": request.model or model, "messages": messages}
    system = _system_text(request)
    if system:
        payload["system"] = [_marked({"type": "text", "text": system})] if cache else system
    if request.tools:
        payload["tools"] = _encode_tools(request, cache)
    payload.update(_settings(request.settings, max_tokens))
    if stream:
        payload["stream"] = True
    if request.settings.extra_body:
        payload.update(request.settings.extra_body)
    return payload


# --- response decoding -----------------------------------------------------------------------


_INPUT_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _usage(value: object, previous: Usage | None = None, path: str = "usage") -> Usage:
    """Usage from a ``usage`` object; fields it omits keep ``previous``'s counts.

    The three prompt fields travel together: when any is present, the absent ones count 0.
    """
    base = previous or Usage()
    if value is None:
        return base
    usage = as_object(value, path)
    output = usage.get("output_tokens")
    outputs = base.output_tokens if output is None else as_count(output, f"{path}.output_tokens")
    prompt = [usage.get(name) for name in _INPUT_FIELDS]
    if all(v is None for v in prompt):
        return Usage(base.input_tokens, outputs, base.cache_read_tokens, base.cache_write_tokens)
    fresh, write, read = (
        as_count(v, f"{path}.{n}") for v, n in zip(prompt, _INPUT_FIELDS, strict=True)
    )
    return Usage(fresh + write + read, outputs, cache_read_tokens=read, cache_write_tokens=write)


def _decode_block(value: object, path: str) -> Part | None:
    block = as_object(value, path)
    kind = block.get("type")
    if kind == "text":
        text = opt_str(block.get("text"), f"{path}.text")
        return TextPart(text) if text else None
    if kind == "tool_use":
        return ToolCallPart(
            nonempty_str(block.get("id"), f"{path}.id"),
            nonempty_str(block.get("name"), f"{path}.name"),
            dict(as_object(block.get("input"), f"{path}.input")),
        )
    return None


def error_from_body(error: Any, *, phase: FailurePhase, request_id: str | None) -> ProviderError:
    """The ``ProviderError`` for an Anthropic ``{"type": "error", "error": {...}}`` payload.

    Any shape is accepted (a field of the wrong type counts as absent): an error event is
    classified as an error even when it is malformed.
    """
    detail = error if isinstance(error, Mapping) else {}
    kind = detail.get("type")
    kind = kind if isinstance(kind, str) and kind else "api_error"
    message = detail.get("message")
    message = message if isinstance(message, str) and message else kind
    cls = _ERROR_TYPES.get(kind, ProviderUnavailable)
    if cls is BadRequestError and is_context_overflow(ErrorInfo(message=message, type=kind)):
        cls = ContextLengthExceeded
    return cls(
        f"anthropic {kind}: {message}",
        provider=_PROVIDER,
        request_id=request_id,
        phase=phase,
        request_sent=True,
    )


def _message(data: object, request_id: str | None) -> ModelResponse:
    """The typed read of a Messages API reply; a wrong shape raises ``WireError``."""
    body = as_object(data, "body")
    content = body.get("content")
    if not isinstance(content, list):
        raise wrong("content", "an array", content)
    blocks = (_decode_block(block, f"content[{i}]") for i, block in enumerate(content))
    return ModelResponse(
        message=Message("assistant", tuple(part for part in blocks if part is not None)),
        usage=_usage(body.get("usage")),
        model=opt_str(body.get("model"), "model") or "",
        stop_reason=opt_str(body.get("stop_reason"), "stop_reason") or None,
        request_id=request_id or opt_str(body.get("id"), "id"),
    )


def parse_response(data: Any, *, request_id: str | None = None, text: str = "") -> ModelResponse:
    """A ``ModelResponse`` from a non-streaming Messages API reply (``ResponseInvalid`` else)."""
    if isinstance(data, Mapping) and data.get("type") == "error":
        raise error_from_body(data.get("error"), phase=FailurePhase.BODY, request_id=request_id)
    try:
        return _message(data, request_id)
    except WireError as exc:
        raise _invalid(f"the reply is not a message ({exc})", text, request_id) from exc


@dataclass
class _Lane:
    """One open content block of a stream."""

    kind: str
    text: str = ""
    call_id: str = ""
    name: str = ""
    initial: Mapping[str, Any] | None = None


@dataclass
class AnthropicStreamState:
    """Pure accumulator of one Messages API SSE stream: ``feed`` events, get ``StreamEvent``s."""

    request_id: str | None = None
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    finished: bool = False
    count: int = 0
    _open: dict[int, _Lane] = field(default_factory=dict)
    _closed: dict[int, Part] = field(default_factory=dict)

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Apply one SSE event; returns what to yield (``done`` after ``message_stop``)."""
        if self.finished or event.event == "ping":
            return []
        self.count += 1
        try:
            data = as_object(loads(event.data, "stream event") if event.data else {}, "event")
            handler = _HANDLERS.get(opt_str(data.get("type"), "type") or event.event)
            return handler(self, data) if handler is not None else []
        except WireError as exc:
            raise _invalid(f"malformed stream event ({exc})", event.data, self.request_id) from exc

    def _start(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        message = opt_object(data.get("message"), "message")
        self.model = opt_str(message.get("model"), "message.model") or ""
        self.request_id = self.request_id or opt_str(message.get("id"), "message.id")
        self.usage = _usage(message.get("usage"), None, "message.usage")
        return []

    def _block_start(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        index = as_index(data.get("index"), "index")
        if index is None:
            raise wrong("index", "a non-negative integer", None)
        block = opt_object(data.get("content_block"), "content_block")
        lane = _Lane(kind=opt_str(block.get("type"), "content_block.type") or "")
        self._open[index] = lane
        if lane.kind == "tool_use":
            lane.call_id = nonempty_str(block.get("id"), "content_block.id")
            lane.name = nonempty_str(block.get("name"), "content_block.name")
            initial = opt_object(block.get("input"), "content_block.input")
            lane.initial = initial or None
            return [StreamEvent("tool_call_delta", index=index, call_id=lane.call_id,
                                name=lane.name)]  # fmt: skip
        text = opt_str(block.get("text"), "content_block.text")
        if lane.kind == "text" and text:
            return self._append(index, lane, {"type": "text_delta", "text": text})
        return []

    def _block_delta(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        index = as_index(data.get("index"), "index")
        delta = opt_object(data.get("delta"), "delta")
        lane = self._open.get(index) if index is not None else None
        if lane is None or index is None:
            return []
        return self._append(index, lane, delta)

    def _append(self, index: int, lane: _Lane, delta: Mapping[str, Any]) -> list[StreamEvent]:
        kind = delta.get("type")
        if kind == "text_delta" and lane.kind == "text":
            piece = opt_str(delta.get("text"), "delta.text") or ""
            lane.text += piece
            return [StreamEvent("text_delta", text=piece)] if piece else []
        if kind == "input_json_delta" and lane.kind == "tool_use":
            piece = opt_str(delta.get("partial_json"), "delta.partial_json") or ""
            lane.text += piece
            return [StreamEvent("tool_call_delta", index=index, call_id=lane.call_id,
                                name=lane.name, arguments=piece)]  # fmt: skip
        return []

    def _block_stop(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        index = as_index(data.get("index"), "index")
        lane = self._open.pop(index, None) if index is not None else None
        if lane is None or index is None:
            return []
        if lane.kind == "text" and lane.text:
            self._closed[index] = TextPart(lane.text)
        elif lane.kind == "tool_use":
            self._closed[index] = ToolCallPart(lane.call_id, lane.name, self._arguments(lane))
        return []

    def _arguments(self, lane: _Lane) -> dict[str, Any]:
        if not lane.text.strip():
            return dict(lane.initial or {})
        try:
            return dict(as_object(loads(lane.text, "tool input"), "tool input"))
        except WireError as exc:  # kept apart to keep the joined text as the body
            raise _invalid(f"tool input of {lane.name!r} is not a JSON object ({exc})",
                           lane.text, self.request_id) from exc  # fmt: skip

    def _delta(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        delta = opt_object(data.get("delta"), "delta")
        stop_reason = opt_str(delta.get("stop_reason"), "delta.stop_reason")
        self.stop_reason = stop_reason or self.stop_reason
        self.usage = _usage(data.get("usage"), self.usage)
        return []

    def _stop(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        self.finished = True
        return [StreamEvent("done", response=self.response())]

    def _error(self, data: Mapping[str, Any]) -> list[StreamEvent]:
        raise error_from_body(
            data.get("error"), phase=FailurePhase.READ, request_id=self.request_id
        )

    def response(self) -> ModelResponse:
        """The response built from the closed blocks, in block order."""
        parts = tuple(self._closed[i] for i in sorted(self._closed))
        return ModelResponse(
            message=Message("assistant", parts),
            usage=self.usage,
            model=self.model,
            stop_reason=self.stop_reason,
            request_id=self.request_id,
        )


_HANDLERS = {
    "message_start": AnthropicStreamState._start,
    "content_block_start": AnthropicStreamState._block_start,
    "content_block_delta": AnthropicStreamState._block_delta,
    "content_block_stop": AnthropicStreamState._block_stop,
    "message_delta": AnthropicStreamState._delta,
    "message_stop": AnthropicStreamState._stop,
    "error": AnthropicStreamState._error,
}


class AnthropicClient(HttpClient):
    """A ``ModelClient`` for the Anthropic Messages API.

    Args:
        model: Default model (a request's ``model`` overrides it).
        api_key: Sent as ``x-api-key``; never shown in errors, logs or ``repr``.
        base_url: API root (``/v1/messages`` is appended).
        timeout: Read/idle-gap timeout in seconds.
        connect_timeout: Connect timeout in seconds.
        max_tokens: ``max_tokens`` when ``ModelSettings.max_tokens`` is unset (the API needs one).
        headers: Extra headers (e.g. ``anthropic-beta``).
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str = "https://api.anthropic.com",
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_tokens: int = 4096,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        check_client(model, base_url, timeout, connect_timeout)
        api_key = require_key(api_key, "ANTHROPIC_API_KEY", _PROVIDER)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigurationError(
                f"max_tokens must be >= 1, got {max_tokens!r}", field="max_tokens"
            )
        self._model = model
        self._provider = _PROVIDER
        self.max_tokens = max_tokens
        self.url = base_url.rstrip("/") + "/v1/messages"
        sent = {"anthropic-version": ANTHROPIC_VERSION, **(headers or {}), "x-api-key": api_key}
        self._transport = HttpTransport(
            provider=_PROVIDER,
            timeout=timeout,
            connect_timeout=connect_timeout,
            headers=sent,
            secrets=(api_key,),
        )

    def __repr__(self) -> str:
        return f"AnthropicClient(model={self._model!r}, url={self.url!r})"

    def _payload(self, request: ModelRequest, stream: bool) -> dict[str, Any]:
        return build_payload(request, model=self._model, max_tokens=self.max_tokens, stream=stream)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one request and parse the reply."""
        reply = await self._transport.post_json(self.url, self._payload(request, False))
        with self._redacting():
            return parse_response(reply.data, request_id=reply.request_id, text=reply.text)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one request; the last event is ``done`` (only after ``message_stop``)."""
        payload = self._payload(request, True)
        with self._redacting():
            async with self._transport.stream_sse(self.url, payload) as sse:
                state = AnthropicStreamState(request_id=sse.request_id)
                async for event in sse:  # drained to the end so the connection is reused
                    for out in state.feed(event):
                        yield out
        if state.finished:
            return
        raise _invalid(
            f"stream ended without message_stop after {state.count} events (truncated?)",
            request_id=state.request_id,
        )
