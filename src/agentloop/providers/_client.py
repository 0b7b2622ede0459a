"""What the HTTP adapters share: the checks at construction and the ``ModelClient`` plumbing.

``OpenAIClient``, ``AnthropicClient`` and ``GeminiClient`` each own a wire format; refusing a
client that cannot work (before any request), ``model``, ``provider``, ``aclose`` and the
redaction of errors decoded from a reply are here once. ``Settings`` validates its ``base_url``
with the same rule. ``ClosingClient`` gives every client, wrappers included, ``async with``.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import urlsplit

from agentloop._util.aio import AsyncClosing
from agentloop.errors import AuthError, ConfigurationError, ProviderError
from agentloop.providers._http import DEFAULT_MAX_CONNECTIONS, HttpTransport

__all__ = [
    "ClosingClient",
    "HttpClient",
    "check_base_url",
    "check_client",
    "check_max_connections",
    "check_key_characters",
    "require_key",
]


def check_base_url(url: object) -> None:
    """Raise ``ConfigurationError`` unless ``url`` is an http(s) URL with a host."""
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"base_url must be an http(s) URL with a host, got {url!r}", field="base_url"
        )


def check_client(
    model: object,
    base_url: object,
    timeout: object,
    connect_timeout: object,
    max_connections: object = DEFAULT_MAX_CONNECTIONS,
) -> None:
    """Raise ``ConfigurationError`` before any request for a client that cannot work."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigurationError("the client needs a non-empty model name", field="model")
    check_base_url(base_url)
    for name, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ConfigurationError(f"{name} must be > 0 seconds, got {value!r}", field=name)
    check_max_connections(max_connections)


def check_max_connections(value: object) -> None:
    """Raise ``ConfigurationError`` unless ``value`` is an integer >= 1 (the pool's size)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"max_connections must be an integer >= 1, got {value!r}", field="max_connections"
        )


def require_key(api_key: object, variable: str, provider: str) -> str:
    """The key: ``api_key``, else the ``variable`` environment variable (as ``Settings`` does).

    Raises ``AuthError("<variable> is not set")`` when neither gives one.
    """
    if api_key is None:
        api_key = os.environ.get(variable, "").strip() or None
    if not isinstance(api_key, str) or not api_key:
        raise AuthError(f"{variable} is not set", provider=provider)
    check_key_characters(api_key)
    return api_key


def check_key_characters(key: str) -> None:
    """Refuse a key with any character an HTTP header cannot carry as is (before any request).

    Keys are printable ASCII; whitespace, control characters (DEL included) and anything
    non-ASCII would fail later inside the HTTP library, or leak into an error message.
    """
    if not all(33 <= ord(ch) <= 126 for ch in key):
        raise ConfigurationError(
            "api_key contains whitespace, control or non-ASCII characters; check how it was "
            "pasted or exported",
            field="api_key",
        )


ClosingClient = AsyncClosing
"""``async with client:`` yields the client and awaits its ``aclose()`` on the way out."""


class HttpClient(ClosingClient):
    """The ``ModelClient`` plumbing of an HTTP adapter; a subclass sets the three attributes.

    The connection pool is bound lazily to the running event loop (one per loop, closed before
    that loop ends), so one client serves any number of ``asyncio.run`` calls. ``aclose()``
    releases the running loop's connections; the client stays usable. Every adapter takes
    ``max_connections`` (the pool's size, ``DEFAULT_MAX_CONNECTIONS``).
    """

    _model: str
    _provider: str
    _transport: HttpTransport

    @property
    def model(self) -> str:
        """The default model (a request's ``model`` overrides it)."""
        return self._model

    @property
    def provider(self) -> str:
        """The provider name stamped on errors and responses."""
        return self._provider

    def _configure(
        self,
        model: str,
        provider: str,
        *,
        headers: Mapping[str, str],
        key: str | None,
        timeout: float,
        connect_timeout: float,
        proxy: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        """Set the three attributes; ``key`` is redacted from every error (no connection yet)."""
        self._model = model
        self._provider = provider
        self._transport = HttpTransport(
            provider=provider,
            timeout=timeout,
            connect_timeout=connect_timeout,
            headers=headers,
            secrets=(key,) if key else (),
            proxy=proxy,
            ssl_context=ssl_context,
            max_connections=max_connections,
        )

    def _configure_bearer(
        self,
        model: str,
        provider: str,
        *,
        api_key: str | None,
        headers: Mapping[str, str] | None,
        timeout: float,
        connect_timeout: float,
        proxy: str | None,
        ssl_context: ssl.SSLContext | None,
        max_connections: int,
    ) -> None:
        """``_configure`` for the OpenAI family: the key travels as a bearer token."""
        all_headers = dict(headers or {})
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        self._configure(
            model,
            provider,
            headers=all_headers,
            key=api_key,
            timeout=timeout,
            connect_timeout=connect_timeout,
            proxy=proxy,
            ssl_context=ssl_context,
            max_connections=max_connections,
        )

    async def warm(self) -> None:
        """Open the running loop's connection pool now (``HttpTransport.warm``)."""
        await self._transport.warm()

    async def aclose(self) -> None:
        """Close the running loop's connection pool; the next request opens a new one."""
        await self._transport.aclose()

    @contextmanager
    def _redacting(self) -> Iterator[None]:
        """Redact the key from errors built from a reply (bodies, stream events) on their way out.

        The transport redacts the errors it builds; the ones a wire decoder builds from a 2xx
        body or a stream event (``ResponseInvalid`` with the raw text, an error event's message)
        pass here. Nothing runs on success.
        """
        try:
            yield
        except ProviderError as error:
            self._transport.redact_error(error)
            raise
