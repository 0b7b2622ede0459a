"""The HTTP layer: the only module that imports aiohttp, and the one place failures are classified.

Every provider adapter sends its requests through ``HttpTransport`` so that limits, timeouts,
redirect refusal, credential redaction and the mapping of every failure into ``agentloop.errors``
(with ``phase`` and ``request_sent``, SPEC section 8) exist exactly once. aiohttp is imported
lazily (when the first request opens a session), so ``import agentloop`` never imports it.

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

    error_for_status(status, headers, body, provider=...)   # the status-code table, reusable for
    parse_error_body(text) -> ErrorInfo(message, type, code) # mid-stream error payloads
    parse_retry_after(headers) -> float | None          # retry-after-ms, Retry-After secs or date
    should_retry_hint(error) -> bool | None              # the ``x-should-retry`` header, if sent
    redact(text, secrets) -> str
    redact_error(error, secrets) -> error   # message, body, request id, redirect host, in place

Both request methods raise only ``agentloop.errors`` (``ProviderError`` subclasses, or
``ConfigurationError`` for a malformed URL); the foreign exception is chained (``from exc``).

Classification (``classify_exception`` and ``error_for_status``):

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
3xx                                 ``UnexpectedRedirect(redirect, True, redirect_host)``
4xx / 5xx                           status table in ``error_for_status`` (phase status),
                                    refined by the body: credit/billing errors ->
                                    ``InsufficientCredits``, a 400 about an invalid API key
                                    -> ``AuthError``, a 429's Google ``retryDelay`` ->
                                    ``retry_after`` when no header gives one
unparseable / oversized body        ``ResponseInvalid(body, True, body=<raw excerpt>)``
=================================  ==================================================

Limits: response bodies 10 MiB (Content-Length and while reading; SSE streams are bounded per
line instead, 1 MiB, plus the idle-gap timeout), error-diagnostic bodies 8 KiB. ``timeout`` is
the read/idle-gap timeout (aiohttp ``sock_read``), not a total deadline: a slow but steady
stream never times out. Redirects are never followed. TCP_NODELAY is set by aiohttp on every
connection; one session (one connection pool) per transport and event loop, opened
lazily by the first request on that loop and closed before that loop ends (``_LoopSession``).

Every error carries ``provider``, ``request_id`` (from ``x-request-id`` / ``request-id``) and
``retry_after`` where known, plus an extra attribute ``should_retry`` (True/False from the
``x-should-retry`` header, else None) that ``RetryingClient`` may honour.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import re
import ssl
import time
from collections.abc import AsyncGenerator, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from agentloop.errors import (
    AgentLoopError,
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
    ProviderUnreachable,
    RateLimited,
    ResponseInvalid,
    UnexpectedRedirect,
)
from agentloop.providers._sse import MAX_SSE_LINE, SSEDecoder, SSEEvent

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "MAX_BODY",
    "MAX_ERROR_BODY",
    "ErrorInfo",
    "HttpResponse",
    "HttpTransport",
    "SSEStream",
    "classify_exception",
    "error_for_status",
    "is_context_overflow",
    "parse_error_body",
    "parse_retry_after",
    "redact",
    "redact_error",
    "should_retry_hint",
]

_log = logging.getLogger(__name__)

MAX_BODY = 10 * 1024 * 1024
"""The largest response body accepted, in bytes (10 MiB)."""
MAX_ERROR_BODY = 8 * 1024
"""How much of an error response is read and kept for diagnostics (8 KiB)."""
_EXCERPT_READ = MAX_ERROR_BODY + 4 * 1024
"""Read past the 8 KiB cut, so a secret straddling it is whole when redacted, then cut."""

_CHUNK = 64 * 1024
_REDACTED = "[REDACTED]"
_CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key"}
)
_SECRET_SHAPES = (
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{4,}"), "sk-" + _REDACTED),
    (re.compile(r"(?i)\bBearer\s+[^\s\"',;]+"), "Bearer " + _REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{10,}"), _REDACTED),
    (re.compile(r"(?i)([?&](?:key|api_key|api-key)=)[^&\s\"']+"), r"\1" + _REDACTED),
)
_CREDIT_CODES = frozenset({"insufficient_quota", "credit_balance_exhausted"})
_CREDIT_PHRASES = ("credit balance is too low", "insufficient credits", "insufficient_quota")
_KEY_PHRASES = ("api key not valid", "api_key_invalid")
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "request_too_large"})
_OVERFLOW_PHRASES = (
    "context length",
    "context_length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input token count",
    "exceeds the maximum number of tokens",
    "reduce the length of the messages",
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove known secret values and key-shaped strings (``sk-...``, ``Bearer ...``)."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, _REDACTED)
    for pattern, replacement in _SECRET_SHAPES:
        text = pattern.sub(replacement, text)
    return text


def redact_error(error: ProviderError, secrets: Iterable[str]) -> ProviderError:
    """Redact ``error``'s provider-sent text in place: message, body, request id, redirect host.

    For errors built from a reply's text; every text attribute a server controls is covered (a
    hostile server may echo the key in a header as readily as in a body).
    """
    secrets = tuple(secrets)
    error.message = redact(error.message, secrets)
    error.args = tuple(redact(a, secrets) if isinstance(a, str) else a for a in error.args)
    for name in ("body", "request_id", "redirect_host"):
        value = getattr(error, name)
        if isinstance(value, str):
            setattr(error, name, redact(value, secrets))
    return error


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``Retry-After`` (delta seconds or HTTP date).

    ``headers`` must have lower-case keys. Negative or unparseable values give None; a date in
    the past gives 0.0.
    """
    millis = headers.get("retry-after-ms")
    if millis is not None:
        seconds = _non_negative_float(millis)
        if seconds is not None:
            return seconds / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _non_negative_float(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _non_negative_float(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    if number != number or number < 0 or number == float("inf"):
        return None
    return number


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """What a provider's JSON error body says (OpenAI, OpenRouter, Anthropic, Gemini shapes).

    ``retry_delay`` is a Google ``RetryInfo`` detail's ``retryDelay`` in seconds, if any.
    """

    message: str | None = None
    type: str | None = None
    code: str | None = None
    retry_delay: float | None = None


def parse_error_body(text: str) -> ErrorInfo:
    """Extract message/type/code from an error body; unknown shapes give an empty ``ErrorInfo``."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return ErrorInfo()
    if isinstance(data, list) and data:
        data = data[0]
    if not isinstance(data, dict):
        return ErrorInfo()
    error = data.get("error", data)
    if isinstance(error, str):
        return ErrorInfo(message=error)
    if not isinstance(error, dict):
        return ErrorInfo()
    return ErrorInfo(
        message=_text(error.get("message")),
        type=_text(error.get("type") or error.get("status")),
        code=_text(error.get("code")),
        retry_delay=_retry_delay(error.get("details")),
    )


def _text(value: object) -> str | None:
    return None if value is None or isinstance(value, dict | list) else str(value)


def _retry_delay(details: object) -> float | None:
    """The first ``retryDelay`` (``"13s"``) among Google error ``details``."""
    for detail in details if isinstance(details, list) else []:
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            return _non_negative_float(delay[:-1])
    return None


def is_context_overflow(info: ErrorInfo, body: str = "") -> bool:
    """Whether an error says the prompt is too long for the model's context."""
    if info.code in _OVERFLOW_CODES or info.type in _OVERFLOW_CODES:
        return True
    text = f"{info.message or ''} {body}".lower()
    return any(phrase in text for phrase in _OVERFLOW_PHRASES)


def _is_credit_error(info: ErrorInfo) -> bool:
    if info.code in _CREDIT_CODES or info.type in _CREDIT_CODES:
        return True
    message = (info.message or "").lower()
    return any(phrase in message for phrase in _CREDIT_PHRASES)


def _says_out_of_credit(status: int, info: ErrorInfo, body: str) -> bool:
    """Whether the body says the account is out of credit.

    A credit code, type or phrase at 400 or 429, Anthropic's ``billing_error`` at any status, or
    Google's quota 429 (``RESOURCE_EXHAUSTED``) that mentions billing and has no ``retryDelay``.
    """
    if info.type == "billing_error" or (status in (400, 429) and _is_credit_error(info)):
        return True
    google_quota = status == 429 and info.type == "RESOURCE_EXHAUSTED"
    return google_quota and info.retry_delay is None and "billing" in body.lower()


def _status_class(status: int, info: ErrorInfo, body: str) -> type[ProviderError]:
    """The SPEC section 8 status table, refined by what the body says."""
    if _says_out_of_credit(status, info, body):
        return InsufficientCredits
    if status == 400 and any(phrase in body.lower() for phrase in _KEY_PHRASES):
        return AuthError  # Gemini answers an invalid key with a 400
    fixed: dict[int, type[ProviderError]] = {
        401: AuthError,
        403: AuthError,
        402: InsufficientCredits,
        404: ModelNotFound,
        408: ProviderTimeout,
        413: ContextLengthExceeded,
        429: RateLimited,
        529: ProviderUnavailable,
    }
    if status in fixed:
        return fixed[status]
    if 400 <= status < 500:
        return ContextLengthExceeded if is_context_overflow(info, body) else BadRequestError
    if status >= 500:
        return ProviderUnavailable
    return ResponseInvalid


def error_for_status(
    status: int,
    headers: Mapping[str, str],
    body: str,
    *,
    provider: str | None,
    secrets: Iterable[str] = (),
    url: str | None = None,
) -> ProviderError:
    """Build the error for a non-2xx, non-3xx response (``headers`` with lower-case keys).

    A 404 names the URL (without its query) and, when its path has no ``/v1``, says that
    OpenAI-compatible servers usually serve under it: the commonest cause is a base URL
    missing it.
    """
    excerpt = _excerpt(body, secrets)
    info = parse_error_body(excerpt)
    cls = _status_class(status, info, excerpt)
    detail = info.message or excerpt.strip()[:500] or "no body"
    retry_after = parse_retry_after(headers)
    if retry_after is None and cls is RateLimited:
        retry_after = info.retry_delay
    where = ""
    if status == 404 and url:
        bare = url.split("?", 1)[0]
        where = f" for POST {bare}"
        if "/v1" not in urlsplit(bare).path:
            detail += "; OpenAI-compatible servers usually serve under /v1 (check base_url)"
    error = cls(
        redact(f"{provider or 'provider'} HTTP {status}{where}: {detail}", secrets),
        provider=provider,
        status_code=status,
        retry_after=retry_after,
        request_id=_request_id(headers, secrets),
        phase=FailurePhase.STATUS,
        request_sent=True,
        body=excerpt,
    )
    _set_hint(error, headers)
    return error


def _excerpt(body: str, secrets: Iterable[str]) -> str:
    """At most 8 KiB of ``body`` for diagnostics, redacted before it is cut."""
    return redact(body[:_EXCERPT_READ], secrets)[:MAX_ERROR_BODY]


def _redirect_error(
    status: int,
    headers: Mapping[str, str],
    url: str,
    provider: str | None,
    secrets: Iterable[str] = (),
) -> UnexpectedRedirect:
    location = headers.get("location", "")
    host = urlsplit(urljoin(url, location)).hostname if location else None
    if host is not None and any(len(s) >= 4 and s.lower() in host for s in secrets):
        host = _REDACTED  # a host is lower-cased: a key in it no longer matches exactly
    error = UnexpectedRedirect(
        f"{provider or 'provider'} HTTP {status}: redirect to {host or 'an unknown host'} "
        "refused (redirects are never followed)",
        provider=provider,
        status_code=status,
        request_id=_request_id(headers, secrets),
        phase=FailurePhase.REDIRECT,
        request_sent=True,
        redirect_host=host,
    )
    _set_hint(error, headers)
    return error


def _request_id(headers: Mapping[str, str], secrets: Iterable[str]) -> str | None:
    """The server's request id (redacted: it is a header the server may fill with anything)."""
    value = headers.get("x-request-id") or headers.get("request-id")
    return None if value is None else redact(value, secrets)


def _set_hint(error: ProviderError, headers: Mapping[str, str]) -> None:
    value = headers.get("x-should-retry", "").strip().lower()
    vars(error)["should_retry"] = {"true": True, "false": False}.get(value)


def should_retry_hint(error: BaseException) -> bool | None:
    """The server's ``x-should-retry`` verdict carried by ``error``, or None when absent."""
    hint = getattr(error, "should_retry", None)
    return hint if isinstance(hint, bool) else None


def invalid_body(
    message: str,
    body: str,
    provider: str | None,
    request_id: str | None = None,
    secrets: Iterable[str] = (),
) -> ResponseInvalid:
    """The one ``ResponseInvalid`` shape: phase body, sent, at most 8 KiB of redacted body."""
    error = ResponseInvalid(
        redact(message, secrets),
        provider=provider,
        request_id=request_id,
        phase=FailurePhase.BODY,
        request_sent=True,
        body=_excerpt(body, secrets),
    )
    vars(error)["should_retry"] = None
    return error


def classify_exception(
    exc: BaseException, *, stage: str, provider: str | None, secrets: Iterable[str] = ()
) -> AgentLoopError:
    """Map a transport exception to the error tree; ``stage`` is connect, send or read."""
    import aiohttp

    detail = redact(f"{type(exc).__name__}: {exc}", secrets)
    if isinstance(exc, aiohttp.InvalidURL):
        return ConfigurationError(f"invalid provider URL: {detail}", field="base_url")
    cls, phase, sent, what = _exception_kind(exc, stage)
    error = cls(
        f"{provider or 'provider'}: {what} ({detail})",
        provider=provider,
        phase=phase,
        request_sent=sent,
    )
    vars(error)["should_retry"] = None
    return error


_Kind = tuple[type[ProviderError], FailurePhase, bool | None, str]


def _exception_kind(exc: BaseException, stage: str) -> _Kind:
    import aiohttp

    if isinstance(exc, aiohttp.ClientHttpProxyError | aiohttp.ClientProxyConnectionError):
        return ProviderUnreachable, FailurePhase.PROXY, False, "the proxy refused the connection"
    if isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError):
        return ProviderUnreachable, FailurePhase.TLS, False, "TLS verification/handshake failed"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return ProviderUnreachable, FailurePhase.CONNECT, False, "DNS lookup failed"
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ProviderTimeout, FailurePhase.CONNECT, False, "connect timed out"
    if isinstance(exc, aiohttp.ClientConnectorError) or stage == "connect":
        if isinstance(exc, TimeoutError):
            return ProviderTimeout, FailurePhase.CONNECT, False, "connect timed out"
        return ProviderUnavailable, FailurePhase.CONNECT, False, "connect failed"
    if isinstance(exc, TimeoutError):
        return ProviderTimeout, FailurePhase.READ, True, "read timed out"
    if stage == "send":
        return ProviderUnavailable, FailurePhase.SEND, None, "the connection failed before a reply"
    return ProviderUnavailable, FailurePhase.READ, True, "reading the response failed"


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A successful JSON reply: status, lower-cased headers, parsed ``data`` and raw ``text``."""

    status: int
    headers: Mapping[str, str]
    data: Any
    text: str
    request_id: str | None


def _lower_headers(response: aiohttp.ClientResponse) -> dict[str, str]:
    return {key.lower(): value for key, value in response.headers.items()}


_FOREIGN: tuple[type[BaseException], ...] = (OSError, TimeoutError)


def _foreign_errors() -> tuple[type[BaseException], ...]:
    import aiohttp

    return (aiohttp.ClientError, *_FOREIGN)


class _LoopSession:
    """One event loop's aiohttp session, closed before that loop ends.

    aiohttp binds a session (its connector, timers and futures) to the loop that created it,
    so a transport keeps one per loop: two ``asyncio.run`` calls, or ``run_sync`` twice, each
    get their own. ``_guardian`` is an async generator first iterated on the session's loop, so
    the loop tracks it: ``shutdown_asyncgens()``, which ``asyncio.run`` and
    ``asyncio.Runner.close`` await before closing the loop, finishes it and so closes the
    session while the loop can still close its sockets (no "Unclosed client session", no
    "Unclosed connector"). A session dropped while its loop runs (the transport was garbage
    collected) is closed on that loop the same way, by asyncio's async-generator finalizer.
    """

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session
        self._guardian = _close_at_loop_shutdown(session)

    async def start(self) -> None:
        """Register the guardian with the running loop (its first iteration does)."""
        await anext(self._guardian)

    async def aclose(self) -> None:
        """Close the session now, on its own (running) loop."""
        await self._guardian.aclose()

    def close_after_loop(self) -> None:
        """Finish a session whose loop has closed, without running that loop.

        After ``asyncio.run`` the guardian has already closed it and this does nothing. A loop
        closed without ``shutdown_asyncgens()`` left it open: aiohttp closes the connector of a
        closed loop by marking it closed and forgetting its connections, without awaiting
        anything, so the close coroutine finishes at its first step and is driven here by hand.
        """
        closing = self._guardian.aclose()
        try:
            closing.send(None)
        except StopIteration:
            return
        except Exception:  # best effort: a dead loop's leftovers must not fail a new request
            _log.debug("closing a session of a closed event loop failed", exc_info=True)
            return
        closing.close()


async def _close_at_loop_shutdown(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await session.close()


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
        """
        self.provider = provider
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._headers = dict(headers or {})
        found = [v for k, v in self._headers.items() if k.lower() in _CREDENTIAL_HEADERS]
        found.extend(_bearer_tokens(found))
        password = urlsplit(proxy).password if proxy else None
        self._secrets = tuple(s for s in (*secrets, *found, password or "") if s)
        self._proxy = proxy
        self._ssl = ssl_context
        self.max_body = max_body
        self.max_line = max_line
        self._resolver = resolver
        self._sessions: dict[asyncio.AbstractEventLoop, _LoopSession] = {}

    def __repr__(self) -> str:
        return f"HttpTransport(provider={self.provider!r}, timeout={self._timeout!r})"

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values this transport redacts (never printed)."""
        return self._secrets

    def redact(self, text: str) -> str:
        """``redact`` with this transport's secrets."""
        return redact(text, self._secrets)

    def redact_error(self, error: ProviderError) -> ProviderError:
        """``redact_error`` with this transport's secrets."""
        return redact_error(error, self._secrets)

    async def _client(self) -> aiohttp.ClientSession:
        """The running loop's session, opened on first use (see ``_LoopSession``)."""
        loop = asyncio.get_running_loop()
        current = self._sessions.get(loop)
        if current is not None and len(self._sessions) == 1 and not current.session.closed:
            return current.session  # the common case: one loop, its session open
        self._drop_dead_sessions()
        current = self._sessions.get(loop)
        if current is None or current.session.closed:
            current = _LoopSession(self._new_session())
            self._sessions[loop] = current
            await current.start()
        return current.session

    def _new_session(self) -> aiohttp.ClientSession:
        import aiohttp

        connector = aiohttp.TCPConnector(
            ssl=self._ssl if self._ssl is not None else True,
            resolver=self._resolver,  # type: ignore[arg-type]
        )
        return aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=self._connect_timeout, sock_read=self._timeout
            ),
            trust_env=False,
        )

    def _drop_dead_sessions(self) -> None:
        """Forget the sessions of loops that have closed, closing any still open."""
        for loop in list(self._sessions):  # a copy: loops in other threads add theirs
            dead = self._sessions.pop(loop, None) if loop.is_closed() else None
            if dead is not None:  # None too when another thread dropped it first
                dead.close_after_loop()

    async def aclose(self) -> None:
        """Release the running loop's connections (idempotent); the transport stays usable.

        The next request opens a new session. A session of another loop that is still open
        closes when that loop shuts down (or by ``aclose`` awaited on it).
        """
        self._drop_dead_sessions()
        current = self._sessions.pop(asyncio.get_running_loop(), None)
        if current is not None:
            await current.aclose()

    async def _open(
        self,
        url: str,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None,
        accept: str,
    ) -> aiohttp.ClientResponse:
        """Send the POST and return a 2xx response; anything else raises an agentloop error."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        merged = {"Content-Type": "application/json", "Accept": accept, **self._headers}
        merged.update(headers or {})
        try:
            session = await self._client()
            response = await session.post(
                url, data=body, headers=merged, allow_redirects=False, proxy=self._proxy
            )
        except _foreign_errors() as exc:
            # aiohttp wraps every failure before the connection exists in a connector error
            # (``_exception_kind`` maps those to the connect phase); anything else happened
            # after connecting, while sending or waiting for the status line.
            raise self._translate(exc, "send") from exc
        try:
            await self._check_status(response, url)
        except BaseException:
            response.close()
            raise
        return response

    def _translate(self, exc: BaseException, stage: str) -> AgentLoopError:
        return classify_exception(exc, stage=stage, provider=self.provider, secrets=self._secrets)

    async def _check_status(self, response: aiohttp.ClientResponse, url: str) -> None:
        status = response.status
        if 200 <= status < 300:
            return
        headers = _lower_headers(response)
        if 300 <= status < 400:
            raise _redirect_error(status, headers, url, self.provider, self._secrets)
        raw = await self._read(response, limit=_EXCERPT_READ, truncate=True)
        text = raw.decode("utf-8", errors="replace")
        raise error_for_status(
            status, headers, text, provider=self.provider, secrets=self._secrets, url=url
        )

    async def _read(
        self, response: aiohttp.ClientResponse, *, limit: int, truncate: bool = False
    ) -> bytes:
        """Read the body up to ``limit`` bytes (raise past it unless ``truncate``)."""
        length = response.content_length
        if not truncate and length is not None and length > limit:
            raise self._too_large(response, f"Content-Length {length}")
        data = bytearray()
        try:
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
            _request_id(_lower_headers(response), self._secrets),
            self._secrets,
        )

    async def post_json(
        self,
        url: str,
        payload: Mapping[str, Any] | bytes,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        """POST ``payload`` as JSON and return the parsed JSON reply."""
        response = await self._open(url, payload, headers, "application/json")
        try:
            raw = await self._read(response, limit=self.max_body)
        finally:
            response.release()
        resp_headers = _lower_headers(response)
        request_id = _request_id(resp_headers, self._secrets)
        text = raw.decode("utf-8", errors="replace")
        try:
            data = json.loads(text)
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
        return SSEStream(self, url, payload, headers)


def _bearer_tokens(values: Iterable[str]) -> list[str]:
    return [v.split(None, 1)[1] for v in values if v.lower().startswith("bearer ") and " " in v]


class SSEStream:
    """An open SSE response: ``async with`` it, then ``async for`` its ``SSEEvent``s.

    Entering sends the request and checks the status (raising the classified error); leaving
    releases the connection. ``request_id`` and ``headers`` are set once entered.
    """

    def __init__(
        self,
        transport: HttpTransport,
        url: str,
        payload: Mapping[str, Any] | bytes,
        headers: Mapping[str, str] | None,
    ) -> None:
        self._transport = transport
        self._url = url
        self._payload = payload
        self._extra = headers
        self._response: aiohttp.ClientResponse | None = None
        self._decoder = SSEDecoder(max_line=transport.max_line)
        self._pending: list[SSEEvent] = []
        self._eof = False
        self.headers: Mapping[str, str] = {}
        self.request_id: str | None = None
        self.status: int | None = None

    async def __aenter__(self) -> SSEStream:
        response = await self._transport._open(
            self._url, self._payload, self._extra, "text/event-stream"
        )
        self._response = response
        self.status = response.status
        self.headers = _lower_headers(response)
        self.request_id = _request_id(self.headers, self._transport.secrets)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._response is not None:
            if exc is None and (self._eof or self._response.content.is_eof()):
                self._response.release()  # the body is complete: the connection is reusable
            else:
                self._response.close()

    def __aiter__(self) -> SSEStream:
        return self

    async def __anext__(self) -> SSEEvent:
        while not self._pending:
            if self._eof:
                raise StopAsyncIteration
            chunk = await self._read_chunk()
            try:
                events = self._decoder.feed(chunk) if chunk else self._decoder.close()
            except ResponseInvalid as error:
                error.provider = self._transport.provider
                error.request_id = self.request_id
                raise
            self._eof = not chunk
            self._pending.extend(reversed(events))
        return self._pending.pop()

    async def _read_chunk(self) -> bytes:
        if self._response is None:
            raise RuntimeError("SSEStream must be entered with 'async with' before iterating")
        try:
            return await self._response.content.readany()
        except _foreign_errors() as exc:
            error = self._transport._translate(exc, "read")
            if isinstance(error, ProviderError):
                error.request_id = self.request_id
            raise error from exc
