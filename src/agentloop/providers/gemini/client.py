"""The Gemini ``generateContent`` adapter: agentloop messages in, ``ModelResponse`` out.

Speaks ``POST {base_url}/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse`` (``tunedModels/{id}`` for a tuned model) through the shared
``HttpTransport``. The key travels in the ``x-goog-api-key`` header, never in the URL; the model
is checked as one path segment (``_paths``) before any request. The wire rules live in two
private modules: ``_encode`` (messages, reasoning parts and settings into a request body) and
``_reply`` (chunks into a response, refusals, finish reasons, usage). What they add up to:

- Call ids: Gemini may omit ``functionCall.id``. A missing id is synthesised as
  ``gemini_<responseId>_<n>`` (or a random stem without a response id): the same id in the
  stream's deltas and in the final response. Results map back by name and order; only ids that
  Gemini itself issued are echoed back.
- Reasoning is part of the transcript (SPEC 16): a ``thoughtSignature`` is a ``ThinkingPart``
  on the message, placed right before the part it signs, and goes back from there. The client
  keeps no state between requests, so a new process, a second worker, ``Agent.resume`` or a
  fallback from another client sends the same body.
- Media (SPEC 16): ``inlineData`` and ``fileData`` parts in place; a tool's media inside its
  ``functionResponse`` on Gemini 3, else in a user turn right after the responses; a part the
  model cannot take is a ``ConfigurationError`` before any request (``accepts_media`` tells the
  engine which kinds, so a tool's other media become a soft error instead).
- Settings: a setting the model's profile refuses is a ``ConfigurationError`` before any
  request; reasoning settings become ``generationConfig.thinkingConfig``; ``extra_body`` merges.
- Stream completion rule: a stream is complete when a chunk carrying ``finishReason`` has arrived
  AND the connection then ended cleanly; chunks after the finish (usage) are still read. EOF
  without a finish reason is ``ResponseInvalid``. A refusal raises ``ModelRefused`` mid-stream.
- Errors: the status table of ``_http`` (which also reads Google's error bodies: a 400 about an
  invalid API key -> ``AuthError``; a 429 with a ``RetryInfo`` is ``RateLimited`` with its
  ``retryDelay`` as ``retry_after``; a 429 about billing without one -> ``InsufficientCredits``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from agentloop.model import ModelRequest, ModelResponse, StreamEvent
from agentloop.provider_tools import ProviderTool
from agentloop.providers._client import HttpClient, check_client, require_key
from agentloop.providers._http import DEFAULT_MAX_CONNECTIONS
from agentloop.providers._paths import path_segment
from agentloop.providers.gemini._encode import (
    BYPASS_SIGNATURE,
    PROVIDER,
    build_payload,
    check_tools,
    encode_contents,
    gemini_profile,
    reader,
)
from agentloop.providers.gemini._reply import REFUSALS, GeminiStreamState, parse_reply

__all__ = [
    "BYPASS_SIGNATURE",
    "REFUSALS",
    "GeminiClient",
    "GeminiStreamState",
    "build_payload",
    "encode_contents",
    "model_path",
    "parse_response",
]


_COLLECTIONS = ("models", "tunedModels")


def model_path(model: str) -> str:
    """The model's resource path, ``models/<id>`` or ``tunedModels/<id>``, checked.

    A bare id is a base model; ``models/`` and ``tunedModels/`` prefixes name the collection
    (the API's ``/v1beta/models/{model}`` and ``/v1beta/tunedModels/{tunedModel}``). Any other
    name that is not one safe path segment is a ``ConfigurationError`` (``_paths``).
    """
    collection, slash, name = model.partition("/")
    if not slash or collection not in _COLLECTIONS:
        collection, name = "models", model
    checked = path_segment(name, provider="Gemini", example="gemini-2.5-flash", given=model)
    return f"{collection}/{checked}"


def parse_response(data: Any, *, request_id: str | None = None, text: str = "") -> ModelResponse:
    """A ``ModelResponse`` from a non-streaming ``generateContent`` reply.

    Raises ``ModelRefused`` for a refused or blocked reply, and the finish reason's error for
    any other finish that is not a reply.
    """
    return parse_reply(data, request_id, text).response()


class GeminiClient(HttpClient):
    """A ``ModelClient`` for the Gemini API (``generateContent``).

    Args:
        model: Default model, e.g. ``gemini-2.5-flash`` (a ``models/`` prefix is accepted), or
            a tuned model, ``tunedModels/<id>``. It goes into the URL path, so a name that is
            not one path segment of letters, digits, ``.``, ``_``, ``-`` is a
            ``ConfigurationError`` (so is such a ``ModelRequest.model``, before any request).
        api_key: Sent as ``x-goog-api-key``; never in the URL, errors, logs or ``repr``.
        base_url: API root including the version.
        timeout: Read/idle-gap timeout in seconds.
        connect_timeout: Connect timeout in seconds.
        headers: Extra headers.
        max_connections: Open connections at most, per event loop (100 by default); more
            requests in flight at once wait for a free one. Raise it for many concurrent
            runs against a server that allows it.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str = "https://generativelanguage.googleapis.com/v1beta",
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        name = model.removeprefix("models/") if isinstance(model, str) else model
        check_client(name, base_url, timeout, connect_timeout, max_connections)
        model_path(model)
        api_key = require_key(api_key, "GEMINI_API_KEY", PROVIDER)
        self.base_url = base_url.rstrip("/")
        self._route = f"{PROVIDER}:{urlsplit(self.base_url).netloc.lower()}"
        self._configure(
            name,
            PROVIDER,
            headers={**(headers or {}), "x-goog-api-key": api_key},
            key=api_key,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_connections=max_connections,
        )

    @property
    def accepts_media(self) -> frozenset[str]:
        """The media kinds the default model takes in a prompt (its profile's ``media``)."""
        return gemini_profile(self._model).media

    def check_provider_tools(self, tools: Sequence[ProviderTool], functions: bool) -> None:
        """``ConfigurationError`` for a built-in tool this model cannot take (SPEC 24)."""
        check_tools(tools, self._model, functions=functions)

    def __repr__(self) -> str:
        return f"GeminiClient(model={self._model!r}, base_url={self.base_url!r})"

    def _target(self, request: ModelRequest) -> str:
        return (request.model or self._model).removeprefix("models/")

    def _origin(self, request: ModelRequest) -> str:
        """What its thought signatures record: the model and this route (``reader``)."""
        return reader(self._target(request), self._route)

    def _url(self, request: ModelRequest, method: str) -> str:
        return f"{self.base_url}/{model_path(request.model or self._model)}:{method}"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one request and parse the reply."""
        payload = build_payload(request, self._model, self._route)
        reply = await self._transport.post_json(self._url(request, "generateContent"), payload)
        with self._redacting():
            state = parse_reply(reply.data, reply.request_id, reply.text, self._origin(request))
            return state.response()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one request; ``done`` follows the finish chunk and a clean end of stream."""
        payload = build_payload(request, self._model, self._route)
        url = self._url(request, "streamGenerateContent") + "?alt=sse"
        with self._redacting():
            async with self._transport.stream_sse(url, payload) as sse:
                state = GeminiStreamState(request_id=sse.request_id, origin=self._origin(request))
                async for event in sse:
                    for out in state.feed(event):
                        yield out
            response = state.response()
        yield StreamEvent("done", response=response)
