"""What a transport exception means: aiohttp's failures mapped onto the error tree (SPEC 8).

The table is ``_http``'s (its module docstring): each failure before a reply becomes a
``ProviderError`` with the ``phase`` it happened in and whether the request was sent. With
``_http``, the only module that imports aiohttp (lazily, inside each function).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from typing import TYPE_CHECKING

from agentloop.errors import (
    AgentLoopError,
    ConfigurationError,
    FailurePhase,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    ProviderUnreachable,
)
from agentloop.safety.redact import redact_secrets as redact

if TYPE_CHECKING:
    import aiohttp

__all__ = ["classify_exception", "foreign_errors", "lower_headers"]

_FOREIGN: tuple[type[BaseException], ...] = (OSError, TimeoutError)


def foreign_errors() -> tuple[type[BaseException], ...]:
    """What a transport call may raise that ``classify_exception`` maps (aiohttp's, OS's)."""
    import aiohttp

    return (aiohttp.ClientError, *_FOREIGN)


def lower_headers(response: aiohttp.ClientResponse) -> dict[str, str]:
    """A response's headers, their names lower-cased."""
    return {key.lower(): value for key, value in response.headers.items()}


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
    error.should_retry = None  # stated: no reply, so no hint
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
