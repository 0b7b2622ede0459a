"""What a provider's failed reply means: status, headers and body in, an ``agentloop`` error out.

Pure: no aiohttp, no sockets, no clock unless one is passed. ``_http`` (the I/O) calls it for
every non-2xx reply and every unusable body; the adapters call it for the error payloads some
servers send inside a 200 reply or mid-stream. What a transport *exception* means (connect
refused, TLS, timeouts) is aiohttp's vocabulary, so ``_http_errors.classify_exception`` keeps it.

=================================  ==================================================
3xx                                 ``UnexpectedRedirect(redirect, True, redirect_host)``
4xx / 5xx                           status table in ``error_for_status`` (phase status),
                                    refined by the body: credit/billing errors ->
                                    ``InsufficientCredits``, a 400 about an invalid API key
                                    -> ``AuthError``, a 429's Google ``retryDelay`` ->
                                    ``retry_after`` when no header gives one; an AWS
                                    ``x-amzn-ErrorType`` names the class instead
                                    (``_aws_errors``)
unparseable / oversized body        ``ResponseInvalid(body, True, body=<raw excerpt>)``
=================================  ==================================================

Every error carries ``provider``, ``request_id`` (from ``x-request-id`` / ``request-id`` /
``x-amzn-RequestId``), ``retry_after`` where known, and ``should_retry`` (True/False from the
``x-should-retry`` header, else None) that ``RetryingClient`` honours. Text a server controls
(message, body excerpt, request id, redirect host) is redacted with ``safety.redact`` before it
is kept; error bodies are kept up to 8 KiB.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Iterable, Mapping
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

from agentloop._util.slots import record
from agentloop.errors import (
    AuthError,
    BadRequestError,
    ContextLengthExceeded,
    FailurePhase,
    InsufficientCredits,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    ResponseInvalid,
    UnexpectedRedirect,
)
from agentloop.providers._aws_errors import aws_error_type, class_for_aws_type
from agentloop.safety.redact import REDACTED, redact_secrets

__all__ = [
    "EXCERPT_READ",
    "MAX_BODY",
    "MAX_ERROR_BODY",
    "ErrorInfo",
    "class_for_error_type",
    "embedded_error",
    "error_for_status",
    "invalid_body",
    "is_context_overflow",
    "parse_error_body",
    "parse_retry_after",
    "redact_error",
    "redirect_error",
    "read_request_id",
    "should_retry_hint",
]

MAX_BODY = 10 * 1024 * 1024
"""The largest response body accepted, in bytes (10 MiB)."""
MAX_ERROR_BODY = 8 * 1024
"""How much of an error response is read and kept for diagnostics (8 KiB)."""
EXCERPT_READ = MAX_ERROR_BODY + 4 * 1024
"""Read past the 8 KiB cut, so a secret straddling it is whole when redacted, then cut."""

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
    "input is too long",
    "too many tokens",
    "input token count",
    "exceeds the maximum number of tokens",
    "reduce the length of the messages",
)
_FIXED_STATUS: Mapping[int, type[ProviderError]] = {
    401: AuthError,
    403: AuthError,
    402: InsufficientCredits,
    404: ModelNotFound,
    408: ProviderTimeout,
    413: ContextLengthExceeded,
    429: RateLimited,
    529: ProviderUnavailable,
}
_ERROR_TYPES: Mapping[str, type[ProviderError]] = {
    "overloaded_error": ProviderUnavailable,
    "api_error": ProviderUnavailable,
    "rate_limit_error": RateLimited,
    "invalid_request_error": BadRequestError,
    "authentication_error": AuthError,
    "permission_error": AuthError,
    "not_found_error": ModelNotFound,
    "request_too_large": ContextLengthExceeded,
    "billing_error": InsufficientCredits,
    "timeout_error": ProviderTimeout,
}
"""Anthropic's error ``type`` names (error bodies and stream ``error`` events)."""
_HINTS: Mapping[str, bool] = {"true": True, "false": False}
_E = TypeVar("_E", bound=ProviderError)


def redact_error(error: ProviderError, secrets: Iterable[str]) -> ProviderError:
    """Redact ``error``'s provider-sent text in place: message, body, request id, redirect host.

    For errors built from a reply's text; every text attribute a server controls is covered (a
    hostile server may echo the key in a header as readily as in a body).
    """
    secrets = tuple(secrets)
    error.message = redact_secrets(error.message, secrets)
    error.args = tuple(redact_secrets(a, secrets) if isinstance(a, str) else a for a in error.args)
    for name in ("body", "request_id", "redirect_host"):
        value = getattr(error, name)
        if isinstance(value, str):
            setattr(error, name, redact_secrets(value, secrets))
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


@record
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
    if status in _FIXED_STATUS:
        return _FIXED_STATUS[status]
    if 400 <= status < 500:
        return ContextLengthExceeded if is_context_overflow(info, body) else BadRequestError
    if status >= 500:
        return ProviderUnavailable
    return ResponseInvalid


def class_for_error_type(kind: str, message: str) -> type[ProviderError]:
    """The class for an Anthropic error ``type``; unknown types are ``ProviderUnavailable``.

    An ``invalid_request_error`` whose message says the prompt is too long is
    ``ContextLengthExceeded``.
    """
    cls = _ERROR_TYPES.get(kind, ProviderUnavailable)
    if cls is BadRequestError and is_context_overflow(ErrorInfo(message=message, type=kind)):
        return ContextLengthExceeded
    return cls


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
    aws = aws_error_type(headers)  # Bedrock: the type names the failure, not the status
    if aws is not None:
        cls = _aws_class(aws, info, excerpt) or cls
    detail = info.message or excerpt.strip()[:500] or "no body"
    if aws is not None:
        detail = f"{aws}: {detail}"
    retry_after = parse_retry_after(headers)
    if retry_after is None and cls is RateLimited:
        retry_after = info.retry_delay
    where = ""
    if status == 404 and url:
        bare = url.split("?", 1)[0]
        where = f" for POST {bare}"
        if "/v1" not in urlsplit(bare).path:
            detail += "; OpenAI-compatible servers usually serve under /v1 (check base_url)"
    return _status_error(
        cls(
            redact_secrets(f"{provider or 'provider'} HTTP {status}{where}: {detail}", secrets),
            retry_after=retry_after,
            phase=FailurePhase.STATUS,
            body=excerpt,
        ),
        status,
        headers,
        provider,
        secrets,
    )


def _aws_class(name: str, info: ErrorInfo, body: str) -> type[ProviderError] | None:
    cls = class_for_aws_type(name)
    if cls is BadRequestError and is_context_overflow(info, body):
        return ContextLengthExceeded
    return cls


def redirect_error(
    status: int,
    headers: Mapping[str, str],
    url: str,
    provider: str | None,
    secrets: Iterable[str] = (),
) -> UnexpectedRedirect:
    """The error for a 3xx reply: redirects are never followed; the target host is named."""
    location = headers.get("location", "")
    host = urlsplit(urljoin(url, location)).hostname if location else None
    if host is not None and any(len(s) >= 4 and s.lower() in host for s in secrets):
        host = REDACTED  # a host is lower-cased: a key in it no longer matches exactly
    error = UnexpectedRedirect(
        f"{provider or 'provider'} HTTP {status}: redirect to {host or 'an unknown host'} "
        "refused (redirects are never followed)",
        phase=FailurePhase.REDIRECT,
        redirect_host=host,
    )
    return _status_error(error, status, headers, provider, secrets)


def _status_error(
    error: _E,
    status: int,
    headers: Mapping[str, str],
    provider: str | None,
    secrets: Iterable[str],
) -> _E:
    """Stamp what every reply with a status line tells: provider, status, id, retry hint."""
    error.provider = provider
    error.status_code = status
    error.request_id = read_request_id(headers, secrets)
    error.request_sent = True
    error.should_retry = _HINTS.get(headers.get("x-should-retry", "").strip().lower())
    return error


def _excerpt(body: str, secrets: Iterable[str]) -> str:
    """At most 8 KiB of ``body`` for diagnostics, redacted before it is cut."""
    return redact_secrets(body[:EXCERPT_READ], secrets)[:MAX_ERROR_BODY]


def read_request_id(headers: Mapping[str, str], secrets: Iterable[str]) -> str | None:
    """The server's request id (redacted: it is a header the server may fill with anything)."""
    value = (
        headers.get("x-request-id") or headers.get("request-id") or headers.get("x-amzn-requestid")
    )
    return None if value is None else redact_secrets(value, secrets)


def should_retry_hint(error: BaseException) -> bool | None:
    """The server's ``x-should-retry`` verdict carried by ``error``, or None when absent."""
    hint = getattr(error, "should_retry", None)
    return hint if isinstance(hint, bool) else None


def embedded_error(
    error: object, body: str, *, provider: str | None, request_id: str | None
) -> ProviderError:
    """The error for an ``{"error": {...}}`` object inside a 2xx body or a stream chunk.

    Classified like an HTTP error with the status its ``code`` names (else 500, i.e.
    ``ProviderUnavailable``); OpenRouter, proxies and Gemini send these.
    """
    code = error.get("code") if isinstance(error, Mapping) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    result = error_for_status(status, {}, body, provider=provider)
    result.request_id = request_id
    return result


def invalid_body(
    message: str,
    body: str,
    provider: str | None,
    request_id: str | None = None,
    secrets: Iterable[str] = (),
) -> ResponseInvalid:
    """The one ``ResponseInvalid`` shape: phase body, sent, at most 8 KiB of redacted body."""
    error = ResponseInvalid(
        redact_secrets(message, secrets),
        provider=provider,
        request_id=request_id,
        phase=FailurePhase.BODY,
        request_sent=True,
        body=_excerpt(body, secrets),
    )
    error.should_retry = None  # stated: a body the server sent carries no hint
    return error
