"""Gemini and Claude on Google Vertex AI (SPEC 24, provider-rules "Google Vertex AI").

One ``VertexClient`` serves both publishers and picks the wire by the request's model name:

- ``claude-*`` (``claude-sonnet-4-5@20250929``): Anthropic's Messages body without ``model``
  and with ``anthropic_version: "vertex-2023-10-16"``, to ``publishers/anthropic/models/
  {model}:rawPredict`` (``:streamRawPredict``, the same SSE as the Claude API). Encoding and
  decoding are the Anthropic adapter's, so Claude's rules (thinking, profiles, media,
  ``append_only`` through ``profiles.profile_for("vertex", ...)``) hold here unchanged. Beta
  features (SPEC 28's binding, native and server tools) go into the body as
  ``anthropic_beta: [...]``: Vertex reads no ``anthropic-beta`` header.
- Any other name (``gemini-2.5-flash``): the ``generateContent`` body to ``publishers/google/
  models/{model}:generateContent`` (``:streamGenerateContent?alt=sse``), with the Gemini
  adapter's encoding and decoding.

Provider tools (SPEC 24) are checked by the wire the model takes: Anthropic's server tools for
Claude, Gemini's built-in tools for Gemini, each against the model's Vertex profile.

Reasoning keeps the label of the wire that wrote it: Claude's thinking is
``ThinkingPart(provider="anthropic")`` and Gemini's signatures ``provider="gemini"``, so a
conversation that moves between the two never sends one's reasoning to the other (each adapter
sends back only its own label). Gemini's signatures also record the route (``vertex:<host>/
<project>``), so a fallback between Gemini on Vertex and the Gemini API with the same model name
sends neither the other's signatures. Errors carry ``provider="vertex"``: Google's
``{"error": {"code", "message", "status"}}`` bodies go through the shared status table, and a
401 for an expired or invalid token is ``AuthError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentloop.errors import ProviderError
from agentloop.model import ModelRequest, ModelResponse, StreamEvent
from agentloop.providers._client import HttpClient, check_client
from agentloop.providers._http import DEFAULT_MAX_CONNECTIONS, HttpTransport
from agentloop.providers._provider_tools import Wire
from agentloop.providers._provider_tools import check as check_tools
from agentloop.providers.anthropic import AnthropicStreamState
from agentloop.providers.anthropic import _server_tools as claude_tools
from agentloop.providers.anthropic import build_payload as claude_payload
from agentloop.providers.anthropic import parse_response as parse_claude
from agentloop.providers.anthropic._reply import invalid_reply
from agentloop.providers.anthropic.client import request_betas
from agentloop.providers.gemini import _builtin as gemini_tools
from agentloop.providers.gemini._encode import build_payload as gemini_payload
from agentloop.providers.gemini._encode import reader
from agentloop.providers.gemini._reply import GeminiStreamState, parse_reply
from agentloop.providers.profiles import profile_for
from agentloop.providers.vertex._auth import GoogleAuth, VertexPlace

if TYPE_CHECKING:
    from agentloop.provider_tools import ProviderTool

__all__ = ["VERTEX_ANTHROPIC_VERSION", "VertexClient", "is_claude"]

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
"""The ``anthropic_version`` every Claude request on Vertex carries in its body."""
_PROVIDER = "vertex"
_CLAUDE_TOOLS = Wire("vertex (Claude, rawPredict)", claude_tools.WIRE.options)
_GEMINI_TOOLS = Wire("vertex (Gemini, generateContent)", gemini_tools.WIRE.options)


def is_claude(model: str) -> bool:
    """Whether a Vertex model name is Claude's (publisher ``anthropic``)."""
    return model.lower().startswith("claude")


class VertexClient(HttpClient):
    """A ``ModelClient`` for Vertex AI (build it with ``build_client``).

    Args:
        model: ``gemini-2.5-flash``, ``claude-sonnet-4-5@20250929``...
        auth: The bearer token's source (``_auth.resolve_vertex``).
        place: Project, location and host.
        timeout: Read/idle-gap timeout in seconds.
        connect_timeout: Connect timeout in seconds.
        max_connections: Open connections at most, per event loop.
    """

    def __init__(
        self,
        model: str,
        *,
        auth: GoogleAuth,
        place: VertexPlace,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        check_client(model, place.base_url, timeout, connect_timeout, max_connections)
        place.url("google", model, "generateContent")  # the name is a safe path segment
        self.place = place
        host = urlsplit(place.base_url).netloc.lower()
        self._route = f"{_PROVIDER}:{host}/{place.project}"
        """Where Gemini's thought signatures were written (``reader``): never the Gemini API's."""
        self._auth = auth
        self._model = model
        self._provider = _PROVIDER
        self._transport = HttpTransport(
            provider=_PROVIDER,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_connections=max_connections,
        )

    def __repr__(self) -> str:
        return (
            f"VertexClient(model={self._model!r}, project={self.place.project!r}, "
            f"location={self.place.location!r})"
        )

    @property
    def accepts_media(self) -> frozenset[str]:
        """The media kinds the default model takes (its profile's)."""
        return profile_for(_PROVIDER, self._model).media

    @property
    def append_only(self) -> bool:
        """Whether the model binds thinking to what came before it (SPEC 28, its profile)."""
        return profile_for(_PROVIDER, self._model).append_only

    def check_provider_tools(self, tools: Sequence[ProviderTool], functions: bool) -> None:
        """``ConfigurationError`` for a provider tool this model cannot take (SPEC 24).

        Claude's server tools or Gemini's built-in tools, by the model's Vertex profile.
        """
        wire = _CLAUDE_TOOLS if is_claude(self._model) else _GEMINI_TOOLS
        profile = profile_for(_PROVIDER, self._model)
        check_tools(tools, wire, self._model, profile, functions=functions)

    async def _headers(self) -> Mapping[str, str]:
        token = await self._auth.token()
        self._transport.add_secret(token)
        return {"Authorization": f"Bearer {token}"}

    def _claude(self, request: ModelRequest, model: str, stream: bool) -> tuple[str, Any]:
        payload = claude_payload(request, model=model, stream=stream, route=_PROVIDER)
        del payload["model"]  # Vertex takes the model from the URL, and refuses it in the body
        payload["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
        betas = request_betas(request, payload)
        if betas:  # in the body: Vertex reads no anthropic-beta header
            payload["anthropic_beta"] = betas
        method = "streamRawPredict" if stream else "rawPredict"
        return self.place.url("anthropic", model, method), payload

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one request and parse the reply."""
        model = request.model or self._model
        headers = await self._headers()
        with _vertex_errors(), self._redacting():
            if is_claude(model):
                url, payload = self._claude(request, model, False)
                reply = await self._transport.post_json(url, payload, headers=headers)
                return parse_claude(reply.data, request_id=reply.request_id, text=reply.text)
            url = self.place.url("google", model, "generateContent")
            payload = gemini_payload(request, self._model, self._route)
            reply = await self._transport.post_json(url, payload, headers=headers)
            origin = reader(model, self._route)
            return parse_reply(reply.data, reply.request_id, reply.text, origin).response()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one request; ``done`` only after the wire's terminal event."""
        model = request.model or self._model
        headers = await self._headers()
        with _vertex_errors(), self._redacting():
            if is_claude(model):
                async for event in self._stream_claude(request, model, headers):
                    yield event
                return
            url = self.place.url("google", model, "streamGenerateContent") + "?alt=sse"
            payload = gemini_payload(request, self._model, self._route)
            async with self._transport.stream_sse(url, payload, headers=headers) as sse:
                state = GeminiStreamState(
                    request_id=sse.request_id, origin=reader(model, self._route)
                )
                async for chunk in sse:
                    for out in state.feed(chunk):
                        yield out
            response = state.response()
        yield StreamEvent("done", response=response)

    async def _stream_claude(
        self, request: ModelRequest, model: str, headers: Mapping[str, str]
    ) -> AsyncIterator[StreamEvent]:
        url, payload = self._claude(request, model, True)
        async with self._transport.stream_sse(url, payload, headers=headers) as sse:
            state = AnthropicStreamState(request_id=sse.request_id)
            async for event in sse:
                for out in state.feed(event):
                    yield out
        if not state.finished:
            raise invalid_reply(
                f"stream ended without message_stop after {state.count} events (truncated?)",
                request_id=state.request_id,
            )


@contextmanager
def _vertex_errors() -> Iterator[None]:
    """Errors the wire decoders raise name ``vertex``, as the transport's do."""
    try:
        yield
    except ProviderError as error:
        error.provider = _PROVIDER
        raise
