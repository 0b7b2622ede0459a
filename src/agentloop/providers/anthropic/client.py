"""The Anthropic Messages API adapter: agentloop messages in, ``ModelResponse`` out.

Speaks ``POST {base_url}/v1/messages`` through the shared ``HttpTransport`` (which classifies
every HTTP failure), both as one JSON reply and as SSE. Wire rules it owns:

- The system prompt (``request.system`` and any ``system`` messages) goes top-level; an
  append-only conversation's entries (SPEC 28) go in place as ``{"role": "system"}`` messages
  where the profile has ``mid_conversation_system``, else fold into ``system`` and ``tools``
  (``_entries``), with the ``anthropic-beta`` values the payload needs (``betas_of``).
  ``ModelRequest.compact_at`` asks for server-side compaction; its ``compaction`` block is a
  ``ProviderPart``, sent back unchanged.
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
    ProviderPart,
    ProviderToolCallPart,
    ProviderToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentloop.model import ModelRequest, ModelResponse, StreamEvent, ToolSpec
from agentloop.providers._client import HttpClient, check_client, require_key
from agentloop.providers._http import DEFAULT_MAX_CONNECTIONS
from agentloop.providers._tool_search import ANTHROPIC_SEARCH_TOOL, anthropic_has
from agentloop.providers.anthropic import _media as media
from agentloop.providers.anthropic import _server_tools as server
from agentloop.providers.anthropic._entries import (
    NATIVE_KEY,
    InEffect,
    betas_of,
    compaction_edits,
    entry_blocks,
    folded_tools,
    last_entry,
    thinking_dropped,
    tool_json,
)
from agentloop.providers.anthropic._reply import error_from_body, invalid_reply, parse_response
from agentloop.providers.anthropic._settings import check_payload, profile, settings_fields
from agentloop.providers.anthropic._stream import AnthropicStreamState
from agentloop.providers.profiles import merge_body, profile_for

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
    if isinstance(part, ProviderPart):  # our own block back unchanged; another's never
        return dict(part.data) if part.provider == _PROVIDER else None
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
    messages: list[Message] | tuple[Message, ...],
    model: str | None = None,
    *,
    entries: Sequence[ToolSpec] | None = None,
    bare_before: int = -1,
) -> list[dict[str, Any]]:
    """The ``messages`` array: tool results as user blocks, same-role neighbours merged.

    ``entries`` (the base tools) sends system entries in place (SPEC 28, ``_entries``): each
    waits for the next assistant turn; without it they are left to the top-level ``system``.
    ``bare_before``: the messages before this index go without their thinking.
    Raises ``ConfigurationError`` for a media part that ``model`` (None: any Anthropic model)
    cannot take, before anything is sent.
    """
    out: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    effect = InEffect(entries) if entries is not None else None
    inline = 0  # the request's media bytes, base64 (the API caps a whole request)
    for index, message in enumerate(messages):
        if message.role == "system":
            if effect is not None and out:
                held.extend(entry_blocks(message, effect.base))
                effect.see(message)
            continue
        if index < bare_before:
            role, blocks, found = message.encoded(_BARE, _BARE_ENCODE)
        else:
            role, blocks, found = message.encoded(_PROVIDER, _encode_message)
        if found:
            inline = media.check(found, model, inline)
        if not blocks:
            continue
        if held and role == "assistant":
            out.append({"role": "system", "content": held})
            held = []
        _join(out, role, blocks)
        if effect is not None:  # a compaction drops the entries before it: state them again
            held.extend(effect.after(message))
    if held:
        out.append({"role": "system", "content": held})
    return out


def _join(out: list[dict[str, Any]], role: str, blocks: Sequence[Any]) -> None:
    """Append ``blocks`` as a ``role`` message, merged into a last message of the same role."""
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": list(blocks)})


_BARE = "anthropic:bare"
_BARE_ENCODE = thinking_dropped(_encode_message)


def _system_text(request: ModelRequest, model: str, in_place: bool) -> str | None:
    """The top-level ``system``: the request's, then system messages (``in_place``: leading)."""
    texts = [request.system] if request.system else []
    for message in request.messages:
        if message.role != "system":
            if in_place:
                break
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
    message's content list is private to this payload, so replacing a block is safe. A system
    entry in place (SPEC 28) is never marked: the message before it is.
    """
    if not messages:
        return
    ends = [len(messages) - 1]
    last_assistant = max(
        (i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None
    )
    if last_assistant is not None and last_assistant > 0:
        ends.append(last_assistant - 1)
    ends = [i - (messages[i]["role"] == "system") for i in ends]
    for index in set(ends):
        content = messages[index]["content"]
        if content[-1]["type"] not in _UNMARKABLE:
            content[-1] = _marked(content[-1])


def request_betas(request: ModelRequest, payload: dict[str, Any]) -> list[str]:
    """The beta features ``payload`` (built for ``request``) needs, each once.

    What its entries, binding and compaction need (SPEC 28), the native tools' (memory's) and
    the server tools' (SPEC 24). The Claude API takes them as the ``anthropic-beta`` header;
    Vertex as the body's ``anthropic_beta`` list.
    """
    betas = [
        *betas_of(payload),
        *(native_betas(request.tools) if request.tools else ()),
        *(server.betas(request.provider_tools) if request.provider_tools else ()),
    ]
    return list(dict.fromkeys(betas))


def native_betas(specs: Sequence[ToolSpec]) -> list[str]:
    """The beta headers the native tools among ``specs`` need (none for function tools)."""
    found = [t.parameters.get(NATIVE_KEY) for t in specs]
    return list(dict.fromkeys(n["beta"] for n in found if isinstance(n, Mapping) and "beta" in n))


def _encode_tools(
    specs: Sequence[ToolSpec], provider_tools: Sequence[ProviderTool], cache: bool
) -> list[dict[str, Any]]:
    tools = [tool_json(t) for t in specs]
    if any(t.defer_loading for t in specs):  # native tool search (SPEC 22), never deferred
        tools.append(dict(ANTHROPIC_SEARCH_TOOL))
    if provider_tools:  # after the function tools: the server tools (SPEC 24)
        tools.extend(server.encode_tools(provider_tools))
    if cache and tools:
        tools[-1] = _marked(tools[-1])
    return tools


def build_payload(
    request: ModelRequest,
    *,
    model: str,
    max_tokens: int | None = None,
    stream: bool,
    route: str = "anthropic",
) -> dict[str, Any]:
    """The Messages API request body for ``request``.

    ``max_tokens``: the client's override of the profile's default output limit (None: the
    profile's). ``route``: the provider the body goes to (``vertex``: its profile row says
    whether entries go in place or fold, SPEC 28). Raises ``ConfigurationError`` (a setting
    the model refuses) and ``TranscriptError`` (reasoning that cannot be sent back) before
    anything is sent.
    """
    settings, name = request.settings, request.model or model
    fields = settings_fields(settings, name, max_tokens)
    cache, tools = settings.cache, request.tools
    found = profile(name) if route == _PROVIDER else profile_for(route, name)
    in_place = found.mid_conversation_system
    bare = -1
    if not in_place:  # entries fold into system and tools (SPEC 28)
        last = last_entry(request.messages)
        if last >= 0:
            tools = folded_tools(tools, request.messages)
            bare = last if found.append_only else -1
    messages = encode_messages(
        tuple(request.messages), name, entries=request.tools if in_place else None, bare_before=bare
    )
    if cache:
        mark_transcript(messages)
    payload: dict[str, Any] = {"model": name, "messages": messages}
    system = _system_text(request, name, in_place)
    if system:
        payload["system"] = [_marked({"type": "text", "text": system})] if cache else system
    if request.provider_tools:
        server.check_tools(request.provider_tools, name, functions=bool(tools))
    if tools or request.provider_tools:
        payload["tools"] = _encode_tools(tools, request.provider_tools, cache)
    payload.update(fields)
    if request.compact_at and found.server_compaction:  # SPEC 28: compaction on their side
        payload["context_management"] = compaction_edits(request.compact_at)
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
        self._betas = _own_betas(headers)
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

    @property
    def server_compaction(self) -> bool:
        """Whether the model compacts on Anthropic's side (``compact_20260112``, its profile)."""
        return profile(self._model).server_compaction

    @property
    def append_only(self) -> bool:
        """Whether the model binds thinking to what came before it (SPEC 28, its profile)."""
        return profile(self._model).append_only

    @property
    def native_tool_search(self) -> bool:
        """Whether the model has Anthropic's tool search tool (SPEC 22: Claude 4.x and later)."""
        return anthropic_has(self._model)

    def check_provider_tools(self, tools: Sequence[ProviderTool], functions: bool) -> None:
        """``ConfigurationError`` for a provider tool this model cannot take (SPEC 24)."""
        server.check_tools(tools, self._model, functions=functions)

    def _payload(self, request: ModelRequest, stream: bool) -> dict[str, Any]:
        return build_payload(request, model=self._model, max_tokens=self.max_tokens, stream=stream)

    def _beta_headers(
        self, request: ModelRequest, payload: dict[str, Any]
    ) -> dict[str, str] | None:
        """The ``anthropic-beta`` header ``payload`` needs, with the client's own (None: none).

        What the payload's entries, binding and compaction need (SPEC 28), the native tools'
        (memory's) and the server tools' (SPEC 24).
        """
        betas = request_betas(request, payload)
        if not betas:
            return None
        return {"anthropic-beta": ",".join(dict.fromkeys([*self._betas, *betas]))}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one request and parse the reply."""
        payload = self._payload(request, False)
        reply = await self._transport.post_json(
            self.url, payload, headers=self._beta_headers(request, payload)
        )
        with self._redacting():
            return parse_response(reply.data, request_id=reply.request_id, text=reply.text)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one request; the last event is ``done`` (only after ``message_stop``)."""
        payload = self._payload(request, True)
        with self._redacting():
            async with self._transport.stream_sse(
                self.url, payload, headers=self._beta_headers(request, payload)
            ) as sse:
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
