"""Amazon Bedrock's Converse API over our own HTTP transport (SPEC 24, provider-rules "Bedrock").

``BedrockClient`` speaks ``POST {endpoint}/model/{modelId}/converse`` (JSON) and
``/converse-stream`` (binary AWS event stream, decoded by botocore's ``EventStreamBuffer`` in
``_bytestream.event_stream``, which a cassette records and replays message by message) through
the shared ``HttpTransport``: the status table, limits, redirect refusal and redaction
are every adapter's. No boto3 client: botocore signs (``_auth``) and decodes frames, nothing more.

- The endpoint is ``https://bedrock-runtime.{region}.amazonaws.com`` (``base_url`` replaces it,
  for a VPC endpoint or a twin). The model id goes into the path percent-encoded (``:`` is
  ``%3A``, an ARN's ``/`` is ``%2F``), as botocore sends it, and the signature is made over that
  path; a name with characters no model id or ARN has is a ``ConfigurationError``.
- Errors: AWS names each in ``x-amzn-ErrorType``; ``_aws_errors`` maps the type onto our tree
  (``ThrottlingException`` ``RateLimited``, ``ValidationException`` ``BadRequestError`` or
  ``ContextLengthExceeded``, ``AccessDeniedException`` ``AuthError``...), with ``phase``,
  ``request_sent`` and the ``x-amzn-RequestId``; mid-stream exception frames too.
- Claude on Bedrock carries Anthropic's profile (``append_only``, adaptive thinking...) through
  ``profiles.profile_for("bedrock", ...)``; its reasoning is ``ThinkingPart(provider="bedrock")``
  and goes back only to Bedrock.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from agentloop.errors import ConfigurationError, ProviderError
from agentloop.model import ModelRequest, ModelResponse, StreamEvent
from agentloop.providers._bytestream import event_stream
from agentloop.providers._client import HttpClient, check_client
from agentloop.providers._http import DEFAULT_MAX_CONNECTIONS, HttpTransport
from agentloop.providers._wire import WireError, as_object, loads
from agentloop.providers.bedrock._auth import AwsAuth
from agentloop.providers.bedrock._encode import PROVIDER, build_payload, refuse_provider_tools
from agentloop.providers.bedrock._reply import (
    ConverseStreamState,
    exception_error,
    invalid_reply,
    parse_converse,
)
from agentloop.providers.profiles import profile_for

if TYPE_CHECKING:
    from agentloop.provider_tools import ProviderTool

__all__ = ["EVENT_STREAM", "BedrockClient", "model_url_path"]

EVENT_STREAM = "application/vnd.amazon.eventstream"
"""The media type of ``ConverseStream``'s reply."""
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,2047}")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")


def model_url_path(model: str) -> str:
    """``/model/<id percent-encoded>``; a name that is no model id or ARN is refused."""
    if not isinstance(model, str) or not _MODEL_ID.fullmatch(model) or ".." in model:
        shown = repr(model) if isinstance(model, str) else f"a {type(model).__name__}"
        raise ConfigurationError(
            f"Bedrock model {shown:.80} is not a model id, inference profile or ARN (letters, "
            "digits, '.', '_', ':', '/', '@', '+', '-'), such as "
            "'us.anthropic.claude-sonnet-4-5-20250929-v1:0'",
            field="model",
        )
    return f"/model/{quote(model, safe='')}"


def check_region(region: object) -> str:
    """``region`` if it looks like an AWS region (``us-east-1``), else ``ConfigurationError``."""
    if isinstance(region, str) and _REGION.fullmatch(region):
        return region
    raise ConfigurationError(
        f"bedrock region must be an AWS region such as 'us-east-1', got {region!r}",
        field="region",
    )


class BedrockClient(HttpClient):
    """A ``ModelClient`` for Bedrock's Converse API (build it with ``build_client``).

    Args:
        model: A model id or inference profile (``us.anthropic.claude-sonnet-4-5-...-v1:0``).
        auth: How requests are authenticated (``_auth.resolve_auth``).
        base_url: The endpoint; None is ``https://bedrock-runtime.{region}.amazonaws.com``.
        timeout: Read/idle-gap timeout in seconds.
        connect_timeout: Connect timeout in seconds.
        max_connections: Open connections at most, per event loop.
    """

    def __init__(
        self,
        model: str,
        *,
        auth: AwsAuth,
        base_url: str | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        region = check_region(auth.region)
        endpoint = base_url or f"https://bedrock-runtime.{region}.amazonaws.com"
        check_client(model, endpoint, timeout, connect_timeout, max_connections)
        model_url_path(model)
        self.endpoint = endpoint.rstrip("/")
        self._auth = auth
        self._model = model
        self._provider = PROVIDER
        self._transport = HttpTransport(
            provider=PROVIDER,
            timeout=timeout,
            connect_timeout=connect_timeout,
            secrets=auth.secrets,
            max_connections=max_connections,
        )
        auth.watch(self._transport.add_secret)  # refreshed credentials are redacted too

    @property
    def append_only(self) -> bool:
        """Whether the model binds thinking to what came before it (SPEC 28, its profile)."""
        return profile_for(PROVIDER, self._model).append_only

    def check_provider_tools(self, tools: Sequence[ProviderTool], functions: bool) -> None:
        """Converse has no provider tools (SPEC 24): any one is a ``ConfigurationError``."""
        refuse_provider_tools(tools, self._model)

    def __repr__(self) -> str:
        return f"BedrockClient(model={self._model!r}, endpoint={self.endpoint!r})"

    @property
    def accepts_media(self) -> frozenset[str]:
        """The media kinds the default model takes (its profile's)."""
        return profile_for(PROVIDER, self._model).media

    async def _prepared(
        self, request: ModelRequest, action: str, accept: str
    ) -> tuple[str, bytes, Mapping[str, str]]:
        model = request.model or self._model
        url = f"{self.endpoint}{model_url_path(model)}/{action}"
        body = json.dumps(build_payload(request, self._model)).encode()
        return url, body, await self._auth.headers(url, body, accept)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one ``Converse`` request and parse the reply."""
        url, body, headers = await self._prepared(request, "converse", "application/json")
        reply = await self._transport.post_json(url, body, headers=headers)
        with self._redacting():
            return parse_converse(
                reply.data, reply.request_id, reply.text, request.model or self._model
            )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one ``ConverseStream`` request; ``done`` follows ``messageStop``."""
        from botocore.eventstream import ParserError

        url, body, headers = await self._prepared(request, "converse-stream", EVENT_STREAM)
        with self._redacting():
            async with event_stream(self._transport, url, body, headers, EVENT_STREAM) as reply:
                state = ConverseStreamState(
                    request_id=reply.request_id, model=request.model or self._model
                )
                try:
                    async for message in reply:
                        for event in _frame_events(state, message.headers, message.payload):
                            yield event
                except ParserError as exc:
                    raise invalid_reply(
                        f"the event stream is malformed ({type(exc).__name__}: {exc})",
                        request_id=state.request_id,
                    ) from exc
            response = state.response()
        yield StreamEvent("done", response=response)


def _frame_events(
    state: ConverseStreamState, headers: Mapping[str, Any], payload: bytes
) -> list[StreamEvent]:
    """One decoded frame: an event for ``state``, or the error an exception frame names."""
    kind = headers.get(":message-type")
    if kind == "exception":
        raise exception_error(str(headers.get(":exception-type")), payload, state.request_id)
    if kind == "error":
        error: ProviderError = exception_error(
            str(headers.get(":error-code") or "InternalServerException"),
            str(headers.get(":error-message") or "").encode(),
            state.request_id,
        )
        raise error
    try:
        data = as_object(loads(payload, "event"), "event")
        return state.feed(str(headers.get(":event-type")), data)
    except WireError as exc:
        raise invalid_reply(
            f"a stream event is not usable ({exc})",
            payload.decode("utf-8", "replace"),
            state.request_id,
        ) from exc
