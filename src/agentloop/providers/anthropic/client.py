"""The Anthropic Messages API adapter: agentloop messages in, ``ModelResponse`` out.

Speaks ``POST {base_url}/v1/messages`` through the shared ``HttpTransport`` (which classifies
every HTTP failure), both as one JSON reply and as SSE. Wire rules it owns:

- The system prompt (``request.system`` and any ``system`` messages) goes top-level.
- An agentloop ``tool`` message becomes one ``user`` message of ``tool_result`` blocks (with
  ``is_error``); consecutive same-role messages are merged, so a user text right after tool
  results joins that user message (results first, as the API requires). Empty text is dropped.
- Reasoning goes back as it came (provider-rules Anthropic 1): a ``ThinkingPart`` whose
  ``provider`` is ``"anthropic"`` is sent in its place as a ``thinking`` block (text and
  ``signature`` unchanged) or, ``redacted=True``, as a ``redacted_thinking`` block (``data`` =
  the signature). Another provider's reasoning is never sent (its parts are dropped); an
  Anthropic part without a signature cannot be sent and is a ``TranscriptError``.
- ``ModelSettings`` and the model's profile become payload fields in ``_settings``
  (thinking, ``max_tokens`` by model, what thinking cannot be combined with); a setting the
  model refuses is a ``ConfigurationError`` before sending. ``extra_body`` merges recursively.
- Replies are decoded in ``_reply`` (JSON) and ``_stream`` (SSE): thinking
  blocks become ``ThinkingPart``s, ``refusal`` raises ``ModelRefused``, a ``tool_use`` cut at the
  output limit is kept with ``INVALID_JSON_KEY`` for the engine to answer; a stream is complete
  only at ``message_stop``, and one that ends without it is ``ResponseInvalid``.
- Prompt caching (``ModelSettings.cache``, on by default): ``cache_control`` breakpoints, at most
  four (provider-rules Anthropic 6): the last tool, the system prompt (then sent as one text
  block), the last block of the transcript (the next turn reads it) and the last block before the
  final assistant message (where the previous request ended, so a turn that adds many blocks
  still hits). Thinking blocks are never marked (the API refuses ``cache_control`` on them).
  Encoded messages are shared and never marked in place: a marked block is a copy.
  ``cache=False`` sends the old payload byte for byte.
- Media (SPEC 16, provider-rules Anthropic 5) in ``_media``: ``image`` and
  ``document`` blocks in user messages and inside a ``tool_result``'s ``content`` (a tool's
  media stay in its result); what Anthropic or the model cannot take (audio, an image type
  beyond the four, an image over 5 MiB of base64, media from the assistant, a kind the
  profile lacks) is a ``ConfigurationError`` naming the part and the model before sending.
  ``AnthropicClient.accepts_media`` tells the engine which kinds a tool may return.
- Server tools (SPEC 24, ``_server_tools``): ``ModelRequest.provider_tools`` become versioned
  ``tools`` entries after the function tools, with the beta headers they need (merged with the
  client's own ``anthropic-beta``; none for web search, so a request without them is unchanged);
  what the model lacks is a ``ConfigurationError`` before sending. Their ``server_tool_use`` and
  ``*_tool_result`` blocks, and cited text blocks, go back exactly as received, in place.
- ``Usage.input_tokens`` includes cache reads and writes (the prompt's real size);
  ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are kept as
  ``cache_read_tokens`` and ``cache_write_tokens``. Thinking is billed inside ``output_tokens``
  and not reported apart, so ``reasoning_tokens`` stays 0.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from agentloop.errors import ConfigurationError, TranscriptError
from agentloop.messages import (
    Message,
    Part,
    ProviderToolCallPart,
    ProviderToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.model import ModelRequest, ModelResponse, StreamEvent
from agentloop.providers._client import HttpClient, check_client, require_key
from agentloop.providers._http import DEFAULT_MAX_CONNECTIONS
from agentloop.providers.anthropic import _media as media
from agentloop.providers.anthropic import _server_tools as server
from agentloop.providers.anthropic._reply import error_from_body, invalid_reply, parse_response
from agentloop.providers.anthropic._settings import check_payload, settings_fields
from agentloop.providers.anthropic._stream import AnthropicStreamState
from agentloop.providers.profiles import merge_body

if TYPE_CHECKING:
    from agentloop.provider_tools import ProviderTool

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


def _encode_thinking(part: ThinkingPart) -> dict[str, Any] | None:
    """Our own reasoning, unchanged; another provider's is never sent (SPEC 16)."""
    if part.provider != _PROVIDER:
        return None
    if not part.signature:
        raise TranscriptError(
            "an Anthropic thinking part without a signature cannot be sent back "
            "(the API requires the signature it issued)"
        )
    if part.redacted:
        return {"type": "redacted_thinking", "data": part.signature}
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def _encode_part(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        if part.citations:
            return server.encode_text(part)
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ToolCallPart):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": dict(part.arguments)}
    if isinstance(part, ToolResultPart):
        return {
            "type": "tool_result",
            "tool_use_id": part.call_id,
            "content": part.content,
            "is_error": part.is_error,
        }
    if isinstance(part, ThinkingPart):
        return _encode_thinking(part)
    if isinstance(part, ProviderToolCallPart | ProviderToolResultPart):
        return server.encode_server_part(part)
    raise ConfigurationError(  # media parts never come here: MediaEncoder has them
        f"anthropic cannot send a {type(part).__name__}", field="messages"
    )


_Encoded: TypeAlias = tuple[str, tuple[dict[str, Any], ...], media.Found]
"""One message's wire form, cached on it: role, blocks, and its media (often none). A plain
tuple: unpacking one is the fastest thing Python does, and every turn unpacks each message."""


def _encode_message(message: Message) -> _Encoded:
    role = "assistant" if message.role == "assistant" else "user"
    blocks: list[dict[str, Any]] = []
    encoder = media.MediaEncoder(role)
    for part in message.parts:
        if isinstance(part, media.MEDIA):
            block = encoder.block(part)
        elif isinstance(part, ToolResultPart) and part.media:
            block = encoder.tool_result(part)
        else:
            block = _encode_part(part)
        if block is not None:
            blocks.append(block)
    return role, tuple(blocks), tuple(encoder.found)


def encode_messages(
    messages: list[Message] | tuple[Message, ...], model: str | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` array: tool results as user blocks, same-role neighbours merged.

    Raises ``ConfigurationError`` for a media part that ``model`` (None: any Anthropic model)
    cannot take, before anything is sent.
    """
    out: list[dict[str, Any]] = []
    inline = 0  # the request's media bytes, base64 (the API caps a whole request)
    for message in messages:
        if message.role == "system":
            continue
        role, blocks, found = message.encoded(_PROVIDER, _encode_message)
        if found:
            inline = media.check(found, model, inline)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})
    return out


def _system_text(request: ModelRequest, model: str) -> str | None:
    texts = [request.system] if request.system else []
    for message in request.messages:
        if message.role != "system":
            continue
        for part in message.parts:
            if isinstance(part, media.MEDIA):
                raise ConfigurationError(
                    f"{model} cannot take {part.describe()} in a system message: Anthropic "
                    "takes media in user messages and tool results only",
                    field="messages",
                )
        if message.text:
            texts.append(message.text)
    return "\n\n".join(texts) or None


EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}
"""The ``cache_control`` value of every breakpoint this adapter places."""


def _marked(block: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``block`` carrying a breakpoint (encoded blocks are shared: never mutate)."""
    return {**block, "cache_control": dict(EPHEMERAL)}


_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


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
        if content[-1]["type"] not in _UNMARKABLE:
            content[-1] = _marked(content[-1])


def _encode_tools(request: ModelRequest, cache: bool) -> list[dict[str, Any]]:
    tools = [
        {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
        for t in request.tools
    ]
    if request.provider_tools:  # after the function tools: the server tools (SPEC 24)
        tools.extend(server.encode_tools(request.provider_tools))
    if cache and tools:
        tools[-1] = _marked(tools[-1])
    return tools


def build_payload(
    request: ModelRequest, *, model: str, max_tokens: int | None = None, stream: bool
) -> dict[str, Any]:
    """The Messages API request body for ``request``.

    ``max_tokens``: the client's override of the profile's default output limit (None: the
    profile's). Raises ``ConfigurationError`` (a setting the model refuses) and
    ``TranscriptError`` (reasoning that cannot be sent back) before anything is sent.
    """
    settings, name = request.settings, request.model or model
    fields = settings_fields(settings, name, max_tokens)
    cache = settings.cache
    messages = encode_messages(tuple(request.messages), name)
    if cache:
        mark_transcript(messages)
    payload: dict[str, Any] = {"model": name, "messages": messages}
    system = _system_text(request, name)
    if system:
        payload["system"] = [_marked({"type": "text", "text": system})] if cache else system
    if request.provider_tools:
        server.check_tools(request.provider_tools, name, functions=bool(request.tools))
    if request.tools or request.provider_tools:
        payload["tools"] = _encode_tools(request, cache)
    payload.update(fields)
    if stream:
        payload["stream"] = True
    if settings.extra_body:
        merge_body(payload, settings.extra_body)
    check_payload(payload, name)
    return payload


def _own_betas(headers: Mapping[str, str] | None) -> list[str]:
    """The ``anthropic-beta`` values the client was given (kept beside a request's own)."""
    given = [v for k, v in (headers or {}).items() if k.lower() == "anthropic-beta"]
    return [b.strip() for value in given for b in value.split(",") if b.strip()]


class AnthropicClient(HttpClient):
    """A ``ModelClient`` for the Anthropic Messages API.

    Args:
        model: Default model (a request's ``model`` overrides it).
        api_key: Sent as ``x-api-key``; never shown in errors, logs or ``repr``.
        base_url: API root (``/v1/messages`` is appended).
        timeout: Read/idle-gap timeout in seconds.
        connect_timeout: Connect timeout in seconds.
        max_tokens: ``max_tokens`` when ``ModelSettings.max_tokens`` is unset (the API needs one);
            None (the default) takes the model's own output limit from its profile
            (``profiles.profile_for("anthropic", model).max_output_tokens``).
        headers: Extra headers (e.g. ``anthropic-beta``).
        max_connections: Open connections at most, per event loop (100 by default); more
            requests in flight at once wait for a free one. Raise it for many concurrent
            runs against a server that allows it.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str = "https://api.anthropic.com",
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_tokens: int | None = None,
        headers: Mapping[str, str] | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        check_client(model, base_url, timeout, connect_timeout, max_connections)
        api_key = require_key(api_key, "ANTHROPIC_API_KEY", _PROVIDER)
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise ConfigurationError(
                f"max_tokens must be >= 1, got {max_tokens!r}", field="max_tokens"
            )
        self.max_tokens = max_tokens
        self.url = base_url.rstrip("/") + "/v1/messages"
        self._betas = tuple(_own_betas(headers))
        sent = {"anthropic-version": ANTHROPIC_VERSION, **(headers or {}), "x-api-key": api_key}
        self._configure(
            model,
            _PROVIDER,
            headers=sent,
            key=api_key,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_connections=max_connections,
        )

    def __repr__(self) -> str:
        return f"AnthropicClient(model={self._model!r}, url={self.url!r})"

    @property
    def accepts_media(self) -> frozenset[str]:
        """The media kinds the model takes (``"image"``, ``"document"``; never audio)."""
        return media.accepts(self._model)

    def check_provider_tools(self, tools: Sequence[ProviderTool], functions: bool) -> None:
        """``ConfigurationError`` for a provider tool this model cannot take (SPEC 24)."""
        server.check_tools(tools, self._model, functions=functions)

    def _payload(self, request: ModelRequest, stream: bool) -> dict[str, Any]:
        return build_payload(request, model=self._model, max_tokens=self.max_tokens, stream=stream)

    def _headers(self, request: ModelRequest) -> dict[str, str] | None:
        """The beta headers a request's server tools need (None: the client's own headers)."""
        needed = server.betas(request.provider_tools) if request.provider_tools else ()
        if not needed:
            return None
        return {"anthropic-beta": ",".join((*self._betas, *needed))}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one request and parse the reply."""
        payload = self._payload(request, False)
        reply = await self._transport.post_json(self.url, payload, headers=self._headers(request))
        with self._redacting():
            return parse_response(reply.data, request_id=reply.request_id, text=reply.text)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one request; the last event is ``done`` (only after ``message_stop``)."""
        payload = self._payload(request, True)
        with self._redacting():
            headers = self._headers(request)
            async with self._transport.stream_sse(self.url, payload, headers=headers) as sse:
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
