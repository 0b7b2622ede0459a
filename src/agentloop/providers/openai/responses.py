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
- Reasoning parts of other providers are never sent, nor OpenAI parts another endpoint or
  organisation wrote: each reasoning part records its ``origin`` (``endpoint_origin``: the
  host and a fingerprint of the key and organisation headers), and a part whose origin is not
  this client's is left out (OpenAI answers 400 ``invalid_encrypted_content`` to another
  organisation's blob, Azure's to OpenAI's and back). Parts stored without an origin are sent
  as before. An assistant message's ``phase`` (``Message.phase``) goes back on each of its
  message items. An OpenAI part without a signature (a
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
- Tools are function tools; a tool's schema and native structured output (``text.format``
  ``json_schema``) go through the strict-mode rewrite Chat Completions uses
  (``_chat_strict``: every object closed and requiring all its properties, optional ones
  made nullable) and are sent ``strict: true`` when it succeeds, else as given with ``strict:
  false``; the nulls strict mode makes the model send for optional properties are dropped from
  the reply (``_chat_restore``), so defaults apply. ``strict`` is always said: this API
  takes an unmarked tool as strict, which a looser schema fails with a 400.
- Media (``_responses_media``): a user message with images or documents sends ``content`` as a
  list (``input_text``, ``input_image`` with a data URL or the URL, ``input_file`` with
  ``filename`` and a PDF data URL, or ``file_url``); a tool's media go in its own
  ``function_call_output``, whose ``output`` becomes a list of the same content. Audio (this API
  has no ``input_audio``), a kind the model's profile does not list, and media in a system or
  assistant message are a ``ConfigurationError`` before sending; ``accepts_media`` says what
  the default model takes (never audio), so the engine answers a tool's other media with a
  soft error.
- With ``ModelSettings.cache`` and a session, api.openai.com also gets ``prompt_cache_key``
  (``openai.prompt_cache_key``).
- Hosted tools (SPEC 24, ``_hosted``): ``web_search``, ``code_interpreter`` and ``file_search``
  after the function tools; their ``*_call`` items are kept raw and sent back in place.

The request is encoded in ``_responses_request``; what a reply becomes, errors included, is in
``_responses_reply``.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentloop.errors import ConfigurationError
from agentloop.model import ModelRequest, ModelResponse, StreamEvent
from agentloop.providers._client import HttpClient, check_client, check_key_characters
from agentloop.providers._http import DEFAULT_MAX_CONNECTIONS
from agentloop.providers._tool_search import responses_has
from agentloop.providers.openai._chat_restore import restore_optional
from agentloop.providers.openai._hosted import check_responses
from agentloop.providers.openai._responses_reply import (
    PROVIDER,
    ResponsesStream,
    failure,
    parse_response,
)
from agentloop.providers.openai._responses_request import (
    REASONING_SUMMARIES,
    encode_request,
    endpoint_origin,
)
from agentloop.providers.profiles import ModelProfile, profile_for

if TYPE_CHECKING:
    from agentloop.provider_tools import ProviderTool

__all__ = [
    "REASONING_SUMMARIES",
    "OpenAIResponsesClient",
    "ResponsesStream",
    "encode_request",
    "failure",
    "parse_response",
]

_CACHE_KEY_HOSTS = frozenset({"api.openai.com"})


def _check_reasoning_options(encrypted: object, summary: object) -> None:
    if summary is not None and summary not in REASONING_SUMMARIES:
        raise ConfigurationError(
            f"reasoning_summary must be one of {REASONING_SUMMARIES} or None, got {summary!r}",
            field="reasoning_summary",
        )
    if encrypted is not None and not isinstance(encrypted, bool):
        raise ConfigurationError(
            f"encrypted_reasoning must be a bool or None, got {encrypted!r}",
            field="encrypted_reasoning",
        )


class OpenAIResponsesClient(HttpClient):
    """``ModelClient`` for OpenAI's Responses API (and servers that speak it, e.g. LiteLLM).

    Nothing is sent until the first request.

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
        max_connections: Open connections at most, per event loop (100 by default); more
            requests in flight at once wait for a free one. Raise it for many concurrent
            runs against a server that allows it.
    """

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
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        check_client(
            model, base_url or self.default_base_url, timeout, connect_timeout, max_connections
        )
        if api_key:
            check_key_characters(api_key)
        _check_reasoning_options(encrypted_reasoning, reasoning_summary)
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self._cache_key = (urlsplit(self.base_url).hostname or "") in _CACHE_KEY_HOSTS
        self._encrypted = encrypted_reasoning
        self._summary = reasoning_summary
        self._profiles: dict[str, ModelProfile] = {}
        self._origin = endpoint_origin(self.base_url, api_key, headers)
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
        """The media kinds the default model takes here (``model.media_kinds`` reads this).

        The model's profile, without audio: the Responses API has no audio input.
        """
        return self._profile(self._model).media - {"audio"}

    @property
    def native_tool_search(self) -> bool:
        """Whether the model has the hosted ``tool_search`` (SPEC 22: gpt-5.4 and later)."""
        return responses_has(self._model)

    def check_provider_tools(self, tools: Sequence[ProviderTool], functions: bool) -> None:
        """``ConfigurationError`` for a hosted tool this model cannot take (SPEC 24)."""
        check_responses(tools, self._model, functions=functions)

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
            origin=self._origin,
        )

    def _restored(self, response: ModelResponse, request: ModelRequest) -> ModelResponse:
        """The reply with strict mode's filled nulls dropped (only where schemas went strict)."""
        if not self._profile(request.model or self._model).strict_schema:
            return response
        return restore_optional(response, request)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the complete reply."""
        reply = await self._transport.post_json(self.url, self._payload(request, False))
        with self._redacting():
            response = parse_response(
                reply.data,
                reply.text,
                provider=self._provider,
                model=request.model or self._model,
                request_id=reply.request_id,
                redactor=self._transport.redact,
                origin=self._origin,
            )
        return self._restored(response, request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream ``request``: text, reasoning and tool-call deltas, then ``done``."""
        payload = self._payload(request, True)
        with self._redacting():
            async with self._transport.stream_sse(self.url, payload) as events:
                state = ResponsesStream(  # made once the reply has come (as OpenAIClient's)
                    provider=self._provider,
                    model=request.model or self._model,
                    secrets=self._transport.secrets,
                    origin=self._origin,
                )
                state.request_id = events.request_id
                async for event in events:  # drained to the end so the connection is reused
                    if not state.finished:
                        for delta in state.feed(event.data, event.event):
                            yield delta
            response = state.response()
        yield StreamEvent("done", response=self._restored(response, request))
