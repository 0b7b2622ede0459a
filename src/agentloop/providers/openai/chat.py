"""OpenAI Chat Completions, and every server that speaks it (OpenRouter, Ollama, vLLM, llama.cpp).

``OpenAIClient`` implements ``ModelClient`` over ``POST {base_url}/chat/completions``, both as one
JSON reply and as an SSE stream. ``OpenRouterClient`` and ``OllamaClient`` are the same adapter
with another default ``base_url``/``provider`` (and no key for Ollama).

Wire mapping:

- ``ModelRequest.system`` becomes the first ``system`` message; agentloop messages are encoded
  once each (``Message.encoded``): the one ``tool`` message of a turn becomes one ``role: tool``
  wire message per ``ToolResultPart`` (the soft-error flag has no wire field: the text says it);
  an assistant message carries ``tool_calls`` with JSON-encoded arguments.
- Media (``_chat_media``): a user message with images, documents or audio sends a list
  of content parts (``image_url`` data URLs or the URL, ``file`` for PDFs, ``input_audio``); a
  tool's media go in one user message right after the turn's ``tool`` messages, which take text
  only. A part the model's profile (or ``OpenAIClient(media=...)``) does not take, or one this
  endpoint has no form for, is a ``ConfigurationError`` before sending; ``accepts_media`` says
  what the default model takes, so the engine answers a tool's other media with a soft error.
- Before anything is sent, the model's profile (``profiles.py``) is checked
  (``_chat_rules``): a setting the model refuses, a Responses-only model, or function
  tools a dotted gpt-5 release refuses beside a reasoning effort is a ``ConfigurationError``.
- ``ModelSettings``: ``temperature``, ``top_p``, ``stop``, ``seed``, ``reasoning_effort`` as
  is; ``max_tokens`` under the profile's wire name (``max_completion_tokens`` for reasoning
  models whatever the host, see ``_chat_rules``; override with ``max_tokens_field``);
  ``tool_choice`` ``auto``/``required``/``none`` as is, any other value names a function;
  ``extra_body`` is merged into the payload last, recursively for objects
  (``profiles.merge_body``).
- Tools and native structured output go ``strict: true`` where the profile allows and the
  schema can be rewritten for strict mode, else ``strict: false`` (``_chat_strict``
  says how and why); nulls the rewrite lets the model send for optional properties are
  dropped from the reply, so defaults apply as without strict mode.
- Reasoning cannot be carried on Chat Completions (the API has no field for it): every
  ``ThinkingPart`` is left out of the request, whichever provider wrote it. Reasoning models
  keep their reasoning between tool calls only on the Responses API.
- Streaming sends ``stream: true`` and ``stream_options: {include_usage: true}``. Deltas of
  choice 0 are accumulated: text (a ``refusal`` is collected apart and raised, never streamed
  as text) and tool calls keyed by their ``index`` (fragments of arguments are joined; parallel
  calls stay apart; a new id on a used index is a new call, see ``ChatStreamAccumulator``). A
  stream is complete only when ``data: [DONE]`` arrives; one that ends before it raises
  ``ResponseInvalid`` and is never returned as an answer. The last ``StreamEvent`` is ``done``
  with the full ``ModelResponse``.
- ``ModelResponse.stop_reason`` is the provider's ``finish_reason`` string (``stop``,
  ``tool_calls``, ``length``...), ``usage`` maps ``prompt_tokens`` /
  ``completion_tokens`` (``input_tokens`` includes cached tokens, as ``prompt_tokens`` does),
  ``prompt_tokens_details.cached_tokens`` / ``.cache_write_tokens`` (OpenRouter) to
  ``cache_read_tokens`` / ``cache_write_tokens`` and
  ``completion_tokens_details.reasoning_tokens`` to ``reasoning_tokens``; ``request_id`` comes
  from ``x-request-id``. A refusal or ``content_filter`` raises ``ModelRefused``, a reply cut at
  ``length`` keeps its unfinished call (``_chat_reply``).
- A 404 "only supported in v1/responses" stays ``ModelNotFound`` with a message naming the
  Responses API.
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

import json
import ssl
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentloop.errors import ModelNotFound
from agentloop.model import (
    INVALID_JSON_KEY,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSpec,
    StreamEvent,
    ToolSpec,
    with_tool_changes,
)
from agentloop.providers._client import HttpClient, check_client, check_key_characters
from agentloop.providers._http import DEFAULT_MAX_CONNECTIONS
from agentloop.providers.openai._chat_media import (
    media_override,
)
from agentloop.providers.openai._chat_reply import (
    ChatStreamAccumulator,
    decode_arguments,
    parse_completion,
)
from agentloop.providers.openai._chat_request import (
    CACHE_KEY_HOSTS,
    body_tail,
    encode_body,
    encode_request,
    encode_tools,
    head_json,
    options_json,
    prompt_cache_key,
    splice_body,
    spliced,
)
from agentloop.providers.openai._chat_restore import may_restore, restore_optional
from agentloop.providers.openai._chat_rules import ChatRules, name_the_fix
from agentloop.providers.openai._chat_shapes import Shape, Shapes

if TYPE_CHECKING:
    from agentloop.provider_tools import ProviderTool

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
        media: Iterable[str] | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
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
            max_tokens_field: Wire name for ``ModelSettings.max_tokens`` for every model; None
                lets the model's profile pick (``max_completion_tokens`` for reasoning models
                and on api.openai.com, ``max_tokens`` elsewhere).
            media: The media kinds (``"image"``, ``"document"``, ``"audio"``) every model of
                this client takes; None lets each model's profile say (an OpenAI-compatible
                server's model that reads PDFs or audio needs it).
            max_connections: Open connections at most, per event loop (100 by default); more
                requests in flight at once wait for a free one. Raise it for many concurrent
                runs against a server that allows it.
        """
        check_client(
            model, base_url or self.default_base_url, timeout, connect_timeout, max_connections
        )
        if api_key:
            check_key_characters(api_key)
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        host = urlsplit(self.base_url).hostname or ""
        self._rules = ChatRules(provider or self.default_provider, host, max_tokens_field)
        self._cache_key = host in CACHE_KEY_HOSTS
        self._media = None if media is None else media_override(media)
        self._tools: tuple[Sequence[ToolSpec], bool, str] | None = None
        self._options: tuple[ModelSettings, OutputSpec | None, tuple[Any, ...], str] | None = None
        self._head: tuple[str, str | None, str] | None = None
        self._shapes = Shapes()  # the checked parts of each request shape seen (an agent's)
        self._configure_bearer(
            model,
            provider or self.default_provider,
            api_key=api_key,
            headers=headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            proxy=proxy,
            ssl_context=ssl_context,
            max_connections=max_connections,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self._model!r}, provider={self._provider!r}, "
            f"base_url={self.base_url!r})"
        )

    @property
    def accepts_media(self) -> frozenset[str]:
        """The media kinds the default model takes (``model.media_kinds`` reads this)."""
        return self._rules.profile(self._model).media if self._media is None else self._media

    def check_provider_tools(self, tools: Sequence[ProviderTool], functions: bool) -> None:
        """Chat Completions has no provider tools: ``ConfigurationError`` naming the fix."""
        from agentloop.providers.openai._hosted import check_chat

        check_chat(tools, self._model, self._provider)

    @property
    def url(self) -> str:
        """The Chat Completions endpoint."""
        return f"{self.base_url}/chat/completions"

    def _url_for(self, model: str) -> str:
        """The endpoint for ``model`` (Azure's dated API puts the deployment in the path)."""
        return self.url

    def _payload(self, request: ModelRequest, model: str, stream: bool) -> tuple[bytes, bool]:
        """The checked body, and whether the reply may need ``restore_optional``.

        It may when strict mode made a property of a tool's or the output's schema nullable.

        A request of a shape seen before (the same model, settings and output objects, tools,
        system prompt and mode: every turn of every run of an agent) was checked then, and its
        body differs only by its messages (and session): it is spliced from the parts kept then
        (``_chat_shapes``).
        """
        request = with_tool_changes(request)  # SPEC 28: an entry's tool change joins tools
        shape = self._shapes.find(request, model, stream)
        if shape is not None:
            tail = shape.tail(request.session_id)
            return splice_body(request, model, shape.head, tail, shape.media), shape.restores
        profile = self._rules.check(model, request)
        strict = profile.strict_schema
        max_field = self._rules.max_field(model)
        media = profile.media if self._media is None else self._media
        tools = self._tools_json(request.tools, strict)
        options = self._options_json(request, stream, max_field, strict)
        head = self._head_json(request.model or self._model, request.system)
        restores = strict and may_restore(request)
        body = encode_body(
            request,
            self._model,
            tools,
            stream=stream,
            max_field=max_field,
            cache_key=self._cache_key,
            strict=strict,
            media=media,
            options=options,
            head=head,
        )
        if spliced(request) and not request.provider_tools:
            tail = body_tail(tools, options)
            shape = Shape(request, head, tail, media, restores, self._cache_key)
            self._shapes.keep(request, model, stream, shape)
        return body, restores

    def _head_json(self, name: str, system: str | None) -> str:
        """``head_json``, encoded again only when the model or the system prompt change."""
        cached = self._head
        if cached is not None and cached[0] == name and cached[1] == system:
            return cached[2]  # one run's system prompt: the same string every turn
        text = head_json(name, system)
        self._head = (name, system, text)
        return text

    def _options_json(
        self, request: ModelRequest, stream: bool, max_field: str, strict: bool
    ) -> str:
        """``options_json``, encoded again only when the settings or the output spec change."""
        settings, output = request.settings, request.output
        key = (request.session_id, stream, max_field, strict)
        cached = self._options
        if (
            cached is not None
            and cached[0] is settings
            and cached[1] is output
            and cached[2] == key
        ):
            return cached[3]  # one run's settings: the same object every turn
        text = options_json(
            request, stream=stream, max_field=max_field, cache_key=self._cache_key, strict=strict
        )
        self._options = (settings, output, key, text)
        return text

    def _tools_json(self, tools: Sequence[ToolSpec], strict: bool) -> str:
        """The tools' JSON, encoded again only when the tools (or strictness) change."""
        if not tools:
            return ""
        cached = self._tools
        if cached is not None and cached[1] == strict and cached[0] == tools:
            return cached[2]  # one agent's tools: the same ToolSpec objects every turn
        text = json.dumps(encode_tools(tools, strict))
        self._tools = (tools, strict, text)
        return text

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the complete reply.

        Raises:
            ConfigurationError: The model refuses a setting or this endpoint (nothing sent).
            ModelRefused: The model refused, or the reply was filtered.
        """
        model = request.model or self._model
        payload, restores = self._payload(request, model, stream=False)
        try:
            reply = await self._transport.post_json(self._url_for(model), payload)
        except ModelNotFound as error:
            name_the_fix(error, model)
            raise
        response = parse_completion(
            reply.data,
            reply.text,
            provider=self._provider,
            model=model,
            request_id=reply.request_id,
            redactor=self._transport.redact,
        )
        return restore_optional(response, request) if restores else response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream ``request``: text and tool-call deltas, then ``done`` with the full reply.

        Raises ``ConfigurationError`` before sending, as ``complete`` does, and ``ModelRefused``
        mid-stream when the model refuses or the reply is filtered.
        """
        model = request.model or self._model
        payload, restores = self._payload(request, model, stream=True)
        try:
            async with self._transport.stream_sse(self._url_for(model), payload) as events:
                # made once the reply has come: not held by a request waiting for a connection
                accumulator = ChatStreamAccumulator(
                    provider=self._provider, model=model, secrets=self._transport.secrets
                )
                accumulator.request_id = events.request_id
                async for event in events:
                    for delta in accumulator.feed(event.data):
                        yield delta
                    if accumulator.done:
                        break
        except ModelNotFound as error:
            name_the_fix(error, model)
            raise
        response = accumulator.response()
        yield StreamEvent(
            "done", response=restore_optional(response, request) if restores else response
        )


class OpenRouterClient(OpenAIClient):
    """OpenRouter's OpenAI-compatible API (402 means out of credits)."""

    default_base_url = "https://openrouter.ai/api/v1"
    default_provider = "openrouter"


class OllamaClient(OpenAIClient):
    """A local Ollama server's OpenAI-compatible API (no key needed)."""

    default_base_url = "http://localhost:11434/v1"
    default_provider = "ollama"
