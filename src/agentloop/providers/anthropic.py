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
from typing import Any

from agentloop.errors import (
    ConfigurationError,
)
from agentloop.messages import Message, Part, TextPart, ThinkingPart, ToolCallPart
from agentloop.model import ModelRequest, ModelResponse, ModelSettings, StreamEvent
from agentloop.providers._anthropic_reply import (
    AnthropicStreamState,
    error_from_body,
    invalid_reply,
    parse_response,
)
from agentloop.providers._client import HttpClient, check_client, require_key

__all__ = [
    "ANTHROPIC_VERSION",
    "EPHEMERAL",
    "AnthropicClient",
    "AnthropicStreamState",
    "build_payload",
    "error_from_body",
    "mark_transcript",
    "parse_response",
]

ANTHROPIC_VERSION = "2023-06-01"
_PROVIDER = "anthropic"
# --- request encoding ------------------------------------------------------------------------


def _encode_part(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ThinkingPart):
        return None  # reasoning is not sent back yet (issue 19 adds it)
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
        self.max_tokens = max_tokens
        self.url = base_url.rstrip("/") + "/v1/messages"
        sent = {"anthropic-version": ANTHROPIC_VERSION, **(headers or {}), "x-api-key": api_key}
        self._configure(
            model,
            _PROVIDER,
            headers=sent,
            key=api_key,
            timeout=timeout,
            connect_timeout=connect_timeout,
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
        raise invalid_reply(
            f"stream ended without message_stop after {state.count} events (truncated?)",
            request_id=state.request_id,
        )
