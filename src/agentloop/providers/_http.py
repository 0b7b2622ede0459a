"""The HTTP I/O: sessions, requests, limits and phases; with ``_http_errors``, all of aiohttp.

Every provider adapter sends its requests through ``HttpTransport`` so that limits, timeouts,
redirect refusal, credential redaction and the mapping of every failure into ``agentloop.errors``
(with ``phase`` and ``request_sent``, SPEC section 8) exist exactly once. What a reply's status
and body mean is decided by the pure ``_classify``; what a transport exception means
(``classify_exception``) by ``_http_errors``, beside the aiohttp it inspects. aiohttp is
imported lazily (when the first request opens a session), so ``import agentloop`` never
imports it.

API (stable; every provider module depends on it)::

    transport = HttpTransport(
        provider="openai", timeout=120.0, connect_timeout=10.0,
        headers={"Authorization": f"Bearer {key}"},   # credential header values are redacted
        secrets=(key,), proxy=None, ssl_context=None,
    )
    reply = await transport.post_json(url, payload)    # -> HttpResponse(status, headers, data,
                                                       #    text, request_id); data = parsed JSON
    async with transport.stream_sse(url, payload) as stream:   # status checked on entry
        stream.request_id, stream.headers
        async for event in stream:                     # _sse.SSEEvent(event, data, id, retry)
            ...
    await transport.aclose()

Both request methods raise only ``agentloop.errors`` (``ProviderError`` subclasses, or
``ConfigurationError`` for a malformed URL); the foreign exception is chained (``from exc``).

Transport failures (``classify_exception``; replies with a status: ``_classify``):

=================================  ==================================================
connect refused / reset             ``ProviderUnavailable(phase=connect, sent=False)``
DNS failure                         ``ProviderUnreachable(connect, False)``
TLS verification / handshake        ``ProviderUnreachable(tls, False)``
proxy refusal (connect or CONNECT)  ``ProviderUnreachable(proxy, False)``
connect timeout                     ``ProviderTimeout(connect, False)``
failure after connecting, before
the response headers (write/reset)  ``ProviderUnavailable(send, None)``
read timeout (idle gap)             ``ProviderTimeout(read, True)``
reset while reading the body        ``ProviderUnavailable(read, True)``
=================================  ==================================================

Limits: response bodies 10 MiB (Content-Length and while reading; SSE streams are bounded per
line instead, 1 MiB, plus the idle-gap timeout), error-diagnostic bodies 8 KiB. ``timeout`` is
the read/idle-gap timeout (aiohttp ``sock_read``), not a total deadline: a slow but steady
stream never times out. Redirects are never followed. TCP_NODELAY is set by aiohttp on every
connection; one session (one connection pool) per transport and event loop, opened
lazily by the first request on that loop and closed before that loop ends (``_LoopSession``).
"""

from __future__ import annotations

import io
import json
import ssl
from collections.abc import Awaitable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

from agentloop._util.slots import record
from agentloop.errors import (
    AgentLoopError,
    ProviderError,
    ResponseInvalid,
)
from agentloop.providers._classify import (
    EXCERPT_READ,
    MAX_BODY,
    MAX_ERROR_BODY,
    ErrorInfo,
    error_for_status,
    invalid_body,
    is_context_overflow,
    parse_error_body,
    parse_retry_after,
    read_request_id,
    redact_error,
    redirect_error,
    should_retry_hint,
)
from agentloop.providers._http_errors import (
    classify_exception,
)
from agentloop.providers._http_errors import (
    foreign_errors as _foreign_errors,
)
from agentloop.providers._http_errors import (
    lower_headers as _lower_headers,
)
from agentloop.providers._paths import as_sent
from agentloop.providers._per_loop import PerLoop
from agentloop.providers._sse import MAX_SSE_LINE
from agentloop.providers._sse_stream import SSEStream
from agentloop.providers._tape import TAPE
from agentloop.providers._wire import decode_json
from agentloop.safety.redact import redact_secrets as redact

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "MAX_BODY",
    "MAX_ERROR_BODY",
    "ErrorInfo",
    "HttpResponse",
    "HttpTransport",
    "SSEStream",
    "classify_exception",
    "error_for_status",
    "form_data",
    "invalid_body",
    "is_context_overflow",
    "parse_error_body",
    "parse_retry_after",
    "redact",
    "redact_error",
    "should_retry_hint",
]


_CHUNK = 64 * 1024
_RAW_BODY = 1 << 20  # a larger body streams: raw bytes past it are aiohttp's ResourceWarning

DEFAULT_MAX_CONNECTIONS = 100
"""Open connections per client and event loop at most (aiohttp's ``TCPConnector(limit=...)``).

The cap protects the server (many providers and local servers limit connections per client)
and this process's file descriptors; it costs throughput only past that many requests in
flight at once, which then wait for a free connection. ``docs/benchmarks.md`` has the figures.
"""
_CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key"}
)


@record(frozen=False)
class HttpResponse:
    """A successful JSON reply: status, lower-cased headers, parsed ``data`` and raw ``text``.

    Not frozen: a frozen record costs a call per field to build, on every reply.
    """

    status: int
    headers: Mapping[str, str]
    data: Any
    text: str
    request_id: str | None


class HttpTransport:
    """One provider client's HTTP connection pools (one per event loop), limits and failures."""

    def __init__(
        self,
        *,
        provider: str,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        secrets: Iterable[str] = (),
        proxy: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        max_body: int = MAX_BODY,
        max_line: int = MAX_SSE_LINE,
        resolver: object | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        """Configure the transport; no connection is opened until the first request.

        Args:
            provider: Name stamped on every error (``openai``, ``anthropic``...).
            timeout: Read/idle-gap timeout in seconds (between bytes, not a total deadline).
            connect_timeout: TCP + TLS connect timeout in seconds.
            headers: Sent on every request; credential header values are treated as secrets.
            secrets: Extra strings to redact from every message and body excerpt.
            proxy: An ``http://`` proxy URL (its password is redacted too).
            ssl_context: Custom TLS context (e.g. trusting a test CA); None = system defaults.
            max_body: Largest JSON response body accepted, in bytes.
            max_line: Largest SSE line accepted, in bytes.
            resolver: An ``aiohttp.abc.AbstractResolver`` (tests); None = aiohttp's default.
            max_connections: Open connections per event loop at most (``DEFAULT_MAX_CONNECTIONS``);
                a request beyond it waits for a free one.
        """
        self.provider = provider
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._headers = dict(headers or {})
        self._merged: dict[str, Mapping[str, str]] = {}
        found = [v for k, v in self._headers.items() if k.lower() in _CREDENTIAL_HEADERS]
        found.extend(_bearer_tokens(found))
        password = urlsplit(proxy).password if proxy else None
        self._secrets = tuple(s for s in (*secrets, *found, password or "") if s)
        self._proxy = proxy
        self._ssl = ssl_context
        self.max_body = max_body
        self.max_line = max_line
        self._resolver = resolver
        self.max_connections = max_connections
        self._sessions = PerLoop(self._new_session)

    def __repr__(self) -> str:
        return f"HttpTransport(provider={self.provider!r}, timeout={self._timeout!r})"

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values this transport redacts (never printed)."""
        return self._secrets

    def add_secret(self, value: str) -> None:
        """Redact ``value`` too from now on (a credential minted later: a refreshed token)."""
        if value and value not in self._secrets:
            self._secrets = (*self._secrets, value)

    def redact(self, text: str) -> str:
        """``redact_secrets`` with this transport's secrets."""
        return redact(text, self._secrets)

    def redact_error(self, error: ProviderError) -> ProviderError:
        """``redact_error`` with this transport's secrets."""
        return redact_error(error, self._secrets)

    def _new_session(self) -> aiohttp.ClientSession:
        import aiohttp

        connector = aiohttp.TCPConnector(
            ssl=self._ssl if self._ssl is not None else True,
            resolver=self._resolver,  # type: ignore[arg-type]
            limit=self.max_connections,
        )
        return aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=self._connect_timeout, sock_read=self._timeout
            ),
            trust_env=False,
        )

    async def warm(self) -> None:
        """Open the running loop's session now (the first one imports aiohttp), not at a send.

        The rate governor (SPEC 25) warms before it admits a request, so this setup never falls
        between counting a request and sending it.
        """
        await self._sessions.get()

    async def aclose(self) -> None:
        """Release the running loop's connections (idempotent); the transport stays usable.

        The next request opens a new session. A session of another loop that is still open
        closes when that loop shuts down (or by ``aclose`` awaited on it).
        """
        await self._sessions.aclose()

    async def _open(
        self,
        url: str,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None,
        accept: str,
    ) -> aiohttp.ClientResponse:
        """Send the POST and return a 2xx response; anything else raises an agentloop error.

        ``post_json`` and ``SSEStream`` write these lines out, a coroutine fewer per request.
        """
        try:
            response = await self._sending(url, payload, headers, accept)
        except _foreign_errors() as exc:
            # aiohttp wraps every failure before the connection exists in a connector error
            # (``_exception_kind`` maps those to the connect phase); anything else happened
            # after connecting, while sending or waiting for the status line.
            raise self._translate(exc, "send") from exc
        if not 200 <= response.status < 300:
            await self._refuse(response, url)
        return response

    def _sending(
        self,
        url: str,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None,
        accept: str,
        session: aiohttp.ClientSession | None = None,
    ) -> Awaitable[aiohttp.ClientResponse]:
        """What sends the POST when awaited (its failures are aiohttp's: ``_open`` maps them).

        aiohttp's request itself once this loop's session is open, so no coroutine of ours waits
        for the reply; else ``_first``, which opens the session first.
        """
        if session is None:
            session = self._sessions.ready()
            if session is None:  # the first request on this loop, or its session was closed
                return self._first(url, payload, headers, accept)
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        merged = self._merged.get(accept) or self._sent_headers(accept)
        if headers:
            merged = {**merged, **headers}
        return session.post(
            url if "%" not in url else as_sent(url),  # a Bedrock model id keeps its escapes
            data=body if len(body) <= _RAW_BODY else io.BytesIO(body),
            headers=merged,
            allow_redirects=False,
            proxy=self._proxy,
        )

    async def _first(
        self,
        url: str,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None,
        accept: str,
    ) -> aiohttp.ClientResponse:
        session = await self._sessions.get()
        return await self._sending(url, payload, headers, accept, session)

    def _sent_headers(self, accept: str) -> Mapping[str, str]:
        """The headers of every request accepting ``accept``, merged once (aiohttp copies them).

        A ``CIMultiDict``, the type aiohttp turns a dict into on every request.
        """
        merged = self._merged.get(accept)
        if merged is None:
            from multidict import CIMultiDict  # aiohttp's own dependency

            merged = CIMultiDict()
            for key, value in {"Content-Type": "application/json", "Accept": accept}.items():
                merged[key] = value
            for key, value in self._headers.items():
                merged[key] = value  # as aiohttp merges: a later name replaces, whatever its case
            self._merged[accept] = merged
        return merged

    def _translate(self, exc: BaseException, stage: str) -> AgentLoopError:
        return classify_exception(exc, stage=stage, provider=self.provider, secrets=self._secrets)

    async def _refuse(self, response: aiohttp.ClientResponse, url: str) -> NoReturn:
        """Raise the error a reply that is not 2xx means; its connection is closed."""
        try:
            status, headers = response.status, _lower_headers(response)
            if 300 <= status < 400:
                raise redirect_error(status, headers, url, self.provider, self._secrets)
            raw = await self._read(response, limit=EXCERPT_READ, truncate=True)
            text = raw.decode("utf-8", errors="replace")
            raise error_for_status(
                status, headers, text, provider=self.provider, secrets=self._secrets, url=url
            )
        finally:
            response.close()

    async def _read(
        self, response: aiohttp.ClientResponse, *, limit: int, truncate: bool = False
    ) -> bytes:
        """Read the body up to ``limit`` bytes (raise past it unless ``truncate``)."""
        length = response.content_length
        if not truncate and length is not None and length > limit:
            raise self._too_large(response, f"Content-Length {length}")
        data = bytearray()
        try:
            if not truncate and length is not None:  # announced and within the limit: one read
                return await response.read()
            while len(data) <= limit:
                chunk = await response.content.read(_CHUNK)
                if not chunk:
                    return bytes(data)
                data += chunk
        except _foreign_errors() as exc:
            raise self._translate(exc, "read") from exc
        if truncate:
            return bytes(data[:limit])
        raise self._too_large(response, f"more than {limit} bytes")

    def _too_large(self, response: aiohttp.ClientResponse, what: str) -> ResponseInvalid:
        return invalid_body(
            f"{self.provider}: response body too large ({what}; limit {self.max_body} bytes)",
            "",
            self.provider,
            read_request_id(_lower_headers(response), self._secrets),
            self._secrets,
        )

    async def post_json(
        self,
        url: str,
        payload: Mapping[str, Any] | bytes,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        """POST ``payload`` as JSON and return the parsed JSON reply (a cassette's, if active)."""
        tape = TAPE.get()
        if tape is not None:  # agentloop.cassettes: replay, or send and record
            return await tape.post_json(self, url, payload, headers)  # type: ignore[no-any-return]
        try:  # ``_open``'s lines, without its coroutine
            response = await self._sending(url, payload, headers, "application/json")
        except _foreign_errors() as exc:
            raise self._translate(exc, "send") from exc
        if not 200 <= response.status < 300:
            await self._refuse(response, url)
        try:
            length = response.content_length
            if length is not None and length <= self.max_body:  # announced and within the limit
                try:  # one read, as _read would do it, without a coroutine of its own
                    raw = await response.read()
                except _foreign_errors() as exc:
                    raise self._translate(exc, "read") from exc
            else:
                raw = await self._read(response, limit=self.max_body)
        finally:
            response.release()
        resp_headers = _lower_headers(response)
        request_id = read_request_id(resp_headers, self._secrets)
        text = raw.decode("utf-8", errors="replace")
        try:
            data = decode_json(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise invalid_body(
                f"{self.provider}: response body is not valid JSON ({exc})",
                text,
                self.provider,
                request_id,
                self._secrets,
            ) from exc
        return HttpResponse(response.status, resp_headers, data, text, request_id)

    def stream_sse(
        self,
        url: str,
        payload: Mapping[str, Any] | bytes,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> SSEStream:
        """POST ``payload`` and decode the reply as SSE; use as ``async with``."""
        tape = TAPE.get()
        if tape is not None:
            return tape.stream_sse(self, url, payload, headers)  # type: ignore[no-any-return]
        return SSEStream(self, url, payload, headers)


def form_data(form: Mapping[str, str | tuple[str, bytes]]) -> aiohttp.FormData:
    """A multipart form (``_http_calls``): a field's text, or a file as ``(filename, content)``."""
    import aiohttp

    data = aiohttp.FormData()
    for name, value in form.items():
        if isinstance(value, str):
            data.add_field(name, value)
        else:
            data.add_field(name, value[1], filename=value[0])
    return data


def _bearer_tokens(values: Iterable[str]) -> list[str]:
    return [v.split(None, 1)[1] for v in values if v.lower().startswith("bearer ") and " " in v]
