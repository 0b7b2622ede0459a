"""Settings and build_client: validation before any request, keys, defaults, wrapping."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentloop.errors import AuthError, ConfigurationError, ProviderError
from agentloop.model import ModelClient
from agentloop.providers import (
    OllamaClient,
    OpenAIClient,
    OpenAIResponsesClient,
    OpenRouterClient,
    Settings,
    build_client,
)
from agentloop.providers.settings import DEFAULT_MODELS, is_local_url

SEED_002 = """
from agentloop.providers import Settings, build_client
from agentloop.errors import ProviderError

try:
    build_client(Settings(provider="openai"))
except ProviderError as error:
    print(type(error).__name__, str(error))
    print(error.status_code, error.request_id, error.summary)
"""


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    names = ("PROVIDER", "MODEL", "BASE_URL", "TIMEOUT", "CONNECT_TIMEOUT", "MAX_RETRIES")
    for var in (*names, "MAX_CONNECTIONS", "API"):
        monkeypatch.delenv(f"AGENTLOOP_{var}", raising=False)


def unwrap(client: ModelClient) -> ModelClient:
    inner = getattr(client, "inner", None)
    return inner if inner is not None else client


def test_seed_002_prints_exactly() -> None:
    env = {k: v for k, v in __import__("os").environ.items() if not k.endswith("_API_KEY")}
    out = subprocess.run(
        [sys.executable, "-c", SEED_002], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout == "AuthError OPENAI_API_KEY is not set\nNone None None\n"


@pytest.mark.parametrize(
    ("provider", "var"),
    [
        ("openai", "OPENAI_API_KEY"),
        ("openrouter", "OPENROUTER_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "GEMINI_API_KEY"),
    ],
)
def test_missing_key_names_the_variable(provider: str, var: str) -> None:
    with pytest.raises(AuthError) as info:
        build_client(Settings(provider=provider))
    assert str(info.value) == f"{var} is not set"
    assert info.value.provider == provider and info.value.request_sent is None


@pytest.mark.parametrize("key", ["", "   "])
def test_blank_key_counts_as_missing(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with pytest.raises(AuthError):
        build_client(Settings(provider="openai"))
    with pytest.raises(AuthError):
        build_client(Settings(provider="openai", api_key=key))


async def test_key_from_environment_and_retry_wrapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-123456")
    client = build_client(Settings(provider="openai"))
    try:
        from agentloop.providers.retrying import RetryingClient

        assert isinstance(client, RetryingClient) and isinstance(client, ModelClient)
        inner = unwrap(client)
        assert isinstance(inner, OpenAIResponsesClient)  # api="auto" on api.openai.com
        assert inner.model == DEFAULT_MODELS["openai"] and client.provider == "openai"
        assert "sk-env-key" not in repr(client) + repr(inner)
    finally:
        await client.aclose()


async def test_max_retries_zero_returns_the_bare_client() -> None:
    settings = Settings(
        provider="openai", api_key="k-123456", model="gpt-x", max_retries=0, api="chat"
    )
    client = build_client(settings)
    try:
        assert type(client) is OpenAIClient and client.model == "gpt-x"
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    ("provider", "cls"), [("ollama", OllamaClient), ("openrouter", OpenRouterClient)]
)
async def test_variants(provider: str, cls: type) -> None:
    settings = Settings(
        provider=provider, api_key=None if provider == "ollama" else "k-1234", max_retries=0
    )
    client = build_client(settings)
    try:
        assert type(client) is cls and client.model == DEFAULT_MODELS[provider]
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "http://localhost:1234/v1",
        "http://10.1.2.3/v1",
        "http://gpu.local:8080/v1",
        "http://[::1]:9/v1",
    ],
)
async def test_local_base_url_needs_no_key(url: str) -> None:
    client = build_client(Settings(provider="openai", base_url=url, max_retries=0))
    try:
        assert isinstance(client, OpenAIClient) and client.base_url == url.rstrip("/")
    finally:
        await client.aclose()


def test_remote_base_url_still_needs_a_key() -> None:
    assert not is_local_url("https://my-vllm.example.com/v1")
    with pytest.raises(AuthError):
        build_client(Settings(provider="openai", base_url="https://my-vllm.example.com/v1"))


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        (Settings(provider="nope"), "provider"),
        (Settings(provider="openai", api_key="k", timeout=0), "timeout"),
        (Settings(provider="openai", api_key="k", timeout=float("nan")), "timeout"),
        (Settings(provider="openai", api_key="k", connect_timeout=-1), "connect_timeout"),
        (Settings(provider="openai", api_key="k", timeout=True), "timeout"),
        (Settings(provider="openai", api_key="k", max_retries=-1), "max_retries"),
        (Settings(provider="openai", api_key="k", max_retries=1.5), "max_retries"),  # type: ignore[arg-type]
        (Settings(provider="openai", api_key="k", model=""), "model"),
        (Settings(provider="openai", api_key="k", base_url="ftp://x"), "base_url"),
        (Settings(provider="openai", api_key="k", base_url="localhost:8000"), "base_url"),
        (Settings(provider="openai", api_key="k y z"), "api_key"),
    ],
)
def test_configuration_errors(settings: Settings, field: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        build_client(settings)
    assert info.value.field == field
    assert not isinstance(info.value, ProviderError)


def test_unknown_provider_is_checked_before_the_key() -> None:
    with pytest.raises(ConfigurationError, match="unknown provider 'nope'"):
        build_client(Settings(provider="nope"))


def test_build_client_rejects_non_settings() -> None:
    with pytest.raises(ConfigurationError):
        build_client({"provider": "openai"})  # type: ignore[arg-type]


def test_repr_hides_the_key() -> None:
    settings = Settings(provider="openai", api_key="sk-very-secret-999")
    assert "sk-very-secret-999" not in repr(settings) and "'***'" in repr(settings)
    assert "sk-very-secret-999" not in str(settings)


def test_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOP_PROVIDER", "ollama")
    monkeypatch.setenv("AGENTLOOP_MODEL", "qwen3")
    monkeypatch.setenv("AGENTLOOP_BASE_URL", "http://127.0.0.1:9999/v1")
    monkeypatch.setenv("AGENTLOOP_TIMEOUT", "30")
    monkeypatch.setenv("AGENTLOOP_MAX_RETRIES", "0")
    settings = Settings.from_env()
    assert settings == Settings(
        provider="ollama",
        model="qwen3",
        base_url="http://127.0.0.1:9999/v1",
        timeout=30.0,
        max_retries=0,
    )
    assert Settings.from_env({}).provider == "openai"
    assert Settings.from_env({}, model="m").model == "m"
    with pytest.raises(ConfigurationError):
        Settings.from_env({"AGENTLOOP_TIMEOUT": "soon"})


def test_explicit_key_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert Settings(provider="openai", api_key="given").resolve_api_key() == "given"
    assert Settings(provider="openai").resolve_api_key() == "from-env"
    assert Settings(provider="ollama").resolve_api_key() is None


async def test_anthropic_is_built_lazily() -> None:
    client = build_client(Settings(provider="anthropic", api_key="k-1234", max_retries=0))
    try:
        assert client.provider == "anthropic" and client.model == DEFAULT_MODELS["anthropic"]
    finally:
        await client.aclose()


async def test_gemini_is_built_lazily() -> None:
    client = build_client(Settings(provider="gemini", api_key="k-1234", max_retries=0))
    try:
        assert client.provider == "gemini" and client.model == DEFAULT_MODELS["gemini"]
    finally:
        await client.aclose()


def test_lazy_exports() -> None:
    import agentloop.providers as providers

    assert providers.RetryingClient.__name__ == "RetryingClient"
    with pytest.raises(AttributeError):
        providers.Nope  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.parametrize(
    "key", ["sk-abc\x7fdef", "sk-abc\x85def", "sk-\u00e9t\u00e9", "sk a", "sk\tb"]
)
def test_a_key_with_control_whitespace_or_non_ascii_characters_is_refused(key: str) -> None:
    from agentloop import Settings, build_client
    from agentloop.providers.openai import OpenAIClient

    with pytest.raises(ConfigurationError, match="api_key contains") as caught:
        build_client(Settings(provider="openai", model="m", api_key=key))
    assert key not in str(caught.value)
    with pytest.raises(ConfigurationError, match="api_key contains"):
        OpenAIClient("m", api_key=key)
