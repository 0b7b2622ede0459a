"""``Settings`` and ``build_client``: one validated place to turn configuration into a client.

``build_client`` checks everything before any request is sent, so a missing key or a typo in a
provider name fails at start-up with a typed error, never mid-run::

    client = build_client(Settings(provider="openai"))         # key from OPENAI_API_KEY
    client = build_client(Settings.from_env())                  # AGENTLOOP_PROVIDER, ...

Keys come from ``Settings.api_key`` or, when it is None, from the provider's environment
variable at ``build_client`` time (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
``OPENROUTER_API_KEY``, ``GEMINI_API_KEY``). ``ollama`` needs none, and neither does any provider
given an explicit local ``base_url`` (loopback, private-network, ``localhost`` or ``.local``
hosts: a vLLM, llama.cpp or LM Studio server, or the fake server). A missing key raises
``AuthError("<VAR> is not set")``; everything else that is wrong raises ``ConfigurationError``
naming the field. The client is wrapped in ``RetryingClient(max_retries=...)`` unless
``max_retries`` is 0.

``api`` picks the OpenAI API (SPEC 16): ``"responses"`` builds an ``OpenAIResponsesClient``,
``"chat"`` an ``OpenAIClient`` (Chat Completions), and ``"auto"`` (the default) the Responses API
for api.openai.com (no ``base_url``, or one on that host) and Chat Completions for every other
``base_url`` (vLLM, llama.cpp, LM Studio and most proxies speak only Chat Completions).
``"responses"`` is for provider ``openai`` only; ``"chat"`` also fits ``openrouter`` and
``ollama`` (which are Chat Completions anyway); ``anthropic`` and ``gemini`` take ``"auto"``.

Default models when ``model`` is None: openai ``gpt-4o-mini``, openrouter
``openai/gpt-4o-mini``, ollama ``llama3.2``, anthropic ``claude-sonnet-4-5``, gemini
``gemini-2.5-flash`` (small, cheap, tool-capable models; name one explicitly for real work).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import field
from typing import Any
from urllib.parse import urlsplit

from agentloop._util.numbers import require_number
from agentloop._util.slots import record
from agentloop._util.suggest import suggest
from agentloop.errors import AuthError, ConfigurationError
from agentloop.model import ClosableModelClient
from agentloop.providers._client import (
    check_base_url,
    check_key_characters,
    check_max_connections,
)
from agentloop.providers._http import DEFAULT_MAX_CONNECTIONS
from agentloop.providers._routes import (
    FAMILY_KEYS,
    FAMILY_MODELS,
    ROUTES,
    build_route,
    check_route_fields,
)

__all__ = ["APIS", "DEFAULT_MODELS", "KEY_ENV_VARS", "PROVIDERS", "Settings", "build_client"]

PROVIDERS = (
    "openai",
    "openrouter",
    "ollama",
    "anthropic",
    "gemini",
    # SPEC 24: the enterprise routes and the OpenAI-compatible families (providers/_routes.py)
    "azure",
    "bedrock",
    "vertex",
    "mistral",
    "groq",
    "xai",
    "deepseek",
    "together",
    "fireworks",
    "cerebras",
    "huggingface",
)
"""The provider names ``Settings.provider`` accepts."""

_CLOSE_PROVIDER = 0.6
"""How alike a mistyped provider must be to one of ``PROVIDERS`` to be suggested."""

APIS = ("auto", "responses", "chat")
"""The values ``Settings.api`` accepts (which OpenAI API a client speaks)."""

_CHAT_PROVIDERS = frozenset({"openai", "openrouter", "ollama", "azure", *FAMILY_KEYS})

KEY_ENV_VARS: Mapping[str, str | None] = {
    "openai": "OPENAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "ollama": None,
    "azure": "AZURE_OPENAI_API_KEY",
    "bedrock": "AWS_BEARER_TOKEN_BEDROCK",  # optional: the AWS credential chain otherwise
    "vertex": None,  # Application Default Credentials
    **FAMILY_KEYS,
}
"""Where each provider's key is read from when ``Settings.api_key`` is None."""

DEFAULT_MODELS: Mapping[str, str] = {
    "openai": "gpt-4o-mini",
    "openrouter": "openai/gpt-4o-mini",
    "ollama": "llama3.2",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "bedrock": "amazon.nova-lite-v1:0",
    "vertex": "gemini-2.5-flash",
    **FAMILY_MODELS,
}
"""The model used when ``Settings.model`` is None (azure has none: name your deployment)."""


@record
class Settings:
    """Which provider and model to use, and how to reach it (validated by ``build_client``).

    ``timeout`` is the read/idle-gap timeout in seconds (not a total deadline);
    ``connect_timeout`` bounds TCP and TLS set-up; ``max_retries`` counts retries after the
    first attempt (0 = no ``RetryingClient``); ``api`` picks the OpenAI API (``"auto"``,
    ``"responses"`` or ``"chat"``, see the module docstring); ``max_connections`` caps the
    client's open connections per event loop (requests beyond it wait for a free one). The key
    never appears in ``repr``.
    """

    provider: str
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    timeout: float = 120.0
    connect_timeout: float = 10.0
    max_retries: int = 3
    api: str = "auto"
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    region: str | None = None
    project: str | None = None
    credentials: Any = field(default=None, repr=False)
    api_version: str | None = None

    def __repr__(self) -> str:
        key = "None" if self.api_key is None else "'***'"
        held = "None" if self.credentials is None else "'***'"
        return (
            f"Settings(provider={self.provider!r}, model={self.model!r}, api_key={key}, "
            f"base_url={self.base_url!r}, timeout={self.timeout!r}, "
            f"connect_timeout={self.connect_timeout!r}, max_retries={self.max_retries!r}, "
            f"api={self.api!r}, max_connections={self.max_connections!r}, "
            f"region={self.region!r}, project={self.project!r}, credentials={held}, "
            f"api_version={self.api_version!r})"
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``AGENTLOOP_PROVIDER`` (default ``openai``), ``AGENTLOOP_MODEL``,
        ``AGENTLOOP_BASE_URL``, ``AGENTLOOP_API``, ``AGENTLOOP_TIMEOUT``,
        ``AGENTLOOP_CONNECT_TIMEOUT``, ``AGENTLOOP_MAX_RETRIES`` and
        ``AGENTLOOP_MAX_CONNECTIONS``; keyword ``overrides`` win.
        Keys stay in their own variables.
        """  # noqa: D205
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {"provider": env.get("AGENTLOOP_PROVIDER") or "openai"}
        for name in ("model", "base_url", "api"):
            value = env.get(f"AGENTLOOP_{name.upper()}")
            if value:
                values[name] = value
        for name, convert in _NUMBERS:
            raw = env.get(f"AGENTLOOP_{name.upper()}")
            if raw:
                values[name] = _convert(name, raw, convert)
        values.update(overrides)
        return cls(**values)

    def key_env_var(self) -> str | None:
        """The environment variable this provider's key is read from (None for ollama)."""
        return KEY_ENV_VARS.get(self.provider)

    def resolve_api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """``api_key`` if given, else the provider's environment variable (blank = None)."""
        if self.api_key is not None:
            return self.api_key.strip() or None
        var = self.key_env_var()
        env = os.environ if environ is None else environ
        value = env.get(var, "") if var else ""
        return value.strip() or None

    def validate(self) -> None:
        """Raise ``ConfigurationError`` for any invalid field (the key is checked at build)."""
        if self.provider not in PROVIDERS:
            close = suggest(str(self.provider), PROVIDERS, _CLOSE_PROVIDER)
            hint = f" (did you mean {close!r}?)" if close else ""
            raise ConfigurationError(
                f"unknown provider {self.provider!r}{hint}; expected one of {', '.join(PROVIDERS)}",
                field="provider",
            )
        if self.model is not None and (not isinstance(self.model, str) or not self.model.strip()):
            raise ConfigurationError("model must be a non-empty string or None", field="model")
        _check_seconds("timeout", self.timeout)
        _check_seconds("connect_timeout", self.connect_timeout)
        retries = self.max_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(
                f"max_retries must be an integer >= 0, got {retries!r}", field="max_retries"
            )
        check_max_connections(self.max_connections)
        if self.base_url is not None:
            check_base_url(self.base_url)
        self._check_api()
        check_route_fields(self)

    def _check_api(self) -> None:
        if self.api not in APIS:
            raise ConfigurationError(
                f"api must be one of {', '.join(APIS)}, got {self.api!r}", field="api"
            )
        fits = (
            self.api == "auto"
            or (self.api == "responses" and self.provider == "openai")
            or (self.api == "chat" and self.provider in _CHAT_PROVIDERS)
        )
        if not fits:
            raise ConfigurationError(
                f"api={self.api!r} does not apply to provider {self.provider!r} "
                "(responses: openai only; chat: openai, azure, openrouter, ollama and the "
                "OpenAI-compatible families)",
                field="api",
            )

    def uses_responses(self) -> bool:
        """Whether ``build_client`` builds an ``OpenAIResponsesClient`` for these settings."""
        if self.provider != "openai" or self.api == "chat":
            return False
        if self.api == "responses" or self.base_url is None:
            return True
        return urlsplit(self.base_url).hostname == "api.openai.com"


_NUMBERS: tuple[tuple[str, type[float] | type[int]], ...] = (
    ("timeout", float),
    ("connect_timeout", float),
    ("max_retries", int),
    ("max_connections", int),
)


def _convert(name: str, raw: str, convert: type[float] | type[int]) -> float | int:
    try:
        return convert(raw)
    except ValueError:
        raise ConfigurationError(
            f"AGENTLOOP_{name.upper()} must be a number, got {raw!r}", field=name
        ) from None


def _check_seconds(name: str, value: object) -> None:
    require_number(value, name, field=name, rule="a positive number of seconds", positive=True)


def is_local_url(url: str | None) -> bool:
    """Whether ``url`` points at this machine or a private network (such servers need no key)."""
    host = urlsplit(url).hostname if url else None
    if not host:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private


def _check_key(settings: Settings, key: str | None) -> None:
    if key is not None:
        check_key_characters(key)
        return
    var = settings.key_env_var()
    if settings.provider in ROUTES:
        return  # bedrock and vertex: a credential chain, checked when the client is built
    if var is not None and not is_local_url(settings.base_url):
        raise AuthError(f"{var} is not set", provider=settings.provider)


def _openai_family(settings: Settings, model: str, key: str | None) -> ClosableModelClient:
    from agentloop.providers.openai import OllamaClient, OpenAIClient, OpenRouterClient

    if settings.uses_responses():
        from agentloop.providers.responses import OpenAIResponsesClient

        return OpenAIResponsesClient(
            model,
            api_key=key,
            base_url=settings.base_url,
            timeout=float(settings.timeout),
            connect_timeout=float(settings.connect_timeout),
            max_connections=settings.max_connections,
        )

    classes = {"openai": OpenAIClient, "openrouter": OpenRouterClient, "ollama": OllamaClient}
    return classes[settings.provider](
        model,
        api_key=key,
        base_url=settings.base_url,
        timeout=float(settings.timeout),
        connect_timeout=float(settings.connect_timeout),
        max_connections=settings.max_connections,
    )


def _other(settings: Settings, model: str, key: str | None) -> ClosableModelClient:
    kwargs: dict[str, Any] = {
        "api_key": key or "local-no-key",
        "timeout": float(settings.timeout),
        "connect_timeout": float(settings.connect_timeout),
        "max_connections": settings.max_connections,
    }
    if settings.base_url is not None:
        kwargs["base_url"] = settings.base_url
    if settings.provider == "anthropic":
        from agentloop.providers.anthropic import AnthropicClient

        client: ClosableModelClient = AnthropicClient(model, **kwargs)
    else:
        from agentloop.providers.gemini import GeminiClient

        client = GeminiClient(model, **kwargs)
    return client


def _default_model(provider: str) -> str:
    model = DEFAULT_MODELS.get(provider)
    if model is None:
        raise ConfigurationError(
            f"{provider} has no default model: name your deployment, "
            f"Settings(provider={provider!r}, model='<deployment>')",
            field="model",
        )
    return model


def build_client(settings: Settings) -> ClosableModelClient:
    """Validate ``settings`` and build the client (wrapped in ``RetryingClient`` by default).

    Raises:
        AuthError: The provider needs a key and none is set (``"<VAR> is not set"``).
        ConfigurationError: Any other invalid setting (unknown provider, bad number or URL).
    """
    if not isinstance(settings, Settings):
        raise ConfigurationError(
            f"build_client expects Settings, got {type(settings).__name__}", field="settings"
        )
    settings.validate()
    key = settings.resolve_api_key()
    _check_key(settings, key)
    model = (settings.model or _default_model(settings.provider)).strip()
    if settings.provider in ROUTES or settings.provider in FAMILY_KEYS:
        client = build_route(settings, model, key)
    elif settings.provider in ("anthropic", "gemini"):
        client = _other(settings, model, key)
    else:
        client = _openai_family(settings, model, key)
    if settings.max_retries == 0:
        return client
    from agentloop.providers.retrying import RetryingClient

    return RetryingClient(client, max_retries=settings.max_retries)
