"""Azure OpenAI against the Azure twin (SPEC 24, issue 33): key, paths, content filter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agentloop import Agent, tool
from agentloop.errors import AuthError, ConfigurationError, ModelNotFound, ModelRefused
from agentloop.messages import Message
from agentloop.model import ClosableModelClient, ModelRequest
from agentloop.providers.openai.azure import AzureOpenAIClient, azure_root
from agentloop.providers.settings import Settings, build_client

from .conftest import serve_app
from .twins.azure import AzureTwin
from .twins.openai_chat import TwinReply

KEY = "azure-twin-key"


@pytest.fixture(autouse=True)
def azure_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return f"{term}: found"


@asynccontextmanager
async def twin_at(*steps: TwinReply) -> AsyncIterator[tuple[AzureTwin, str]]:
    twin = AzureTwin(*steps, key=KEY)
    async with serve_app(twin.app()) as url:
        yield twin, url


def _client_unclosed(
    url: str, model: str = "gpt-4o-mini", **settings: object
) -> ClosableModelClient:
    return build_client(
        Settings(provider="azure", model=model, base_url=url, max_retries=0, **settings)  # type: ignore[arg-type]
    )


async def test_the_v1_api_sends_the_key_as_api_key_and_the_deployment_as_model() -> None:
    script = [TwinReply(tool_calls=[("lookup", {"term": "x"})]), TwinReply("done")]
    async with twin_at(*script) as (twin, url):
        run = await Agent(client(url), tools=[lookup]).run("go")
    assert run.output == "done" and twin.urls == ["/openai/v1/chat/completions"] * 2
    assert all(h["api-key"] == KEY and "Authorization" not in h for h in twin.headers)
    assert twin.chat.accepted[0]["model"] == "gpt-4o-mini"
    second = twin.chat.accepted[1]["messages"]
    assert second[: len(twin.chat.accepted[0]["messages"])] == twin.chat.accepted[0]["messages"]


async def test_the_dated_api_puts_the_deployment_in_the_path() -> None:
    async with twin_at(TwinReply("ok")) as (twin, url):
        dated = client(url, api_version="2024-10-21")
        response = await dated.complete(ModelRequest([Message.user("hi")]))
    assert response.text == "ok"
    assert twin.urls == ["/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21"]


async def test_an_endpoint_given_with_its_v1_path_is_the_same_resource() -> None:
    assert azure_root("https://r.openai.azure.com/openai/v1/") == "https://r.openai.azure.com"
    async with twin_at(TwinReply("ok")) as (twin, url):
        response = await client(f"{url}/openai/v1").complete(ModelRequest([Message.user("x")]))
    assert response.text == "ok" and twin.urls == ["/openai/v1/chat/completions"]


async def test_a_prompt_the_filter_blocks_is_a_refusal_not_a_bad_request() -> None:
    async with twin_at(TwinReply("never")) as (twin, url):
        with pytest.raises(ModelRefused) as info:
            await Agent(client(url)).run("something FORBIDDEN")
    assert info.value.reason == "content_filter" and twin.chat.accepted == []


async def test_a_filtered_completion_is_a_refusal_too() -> None:
    async with twin_at(TwinReply("partial", finish_reason="content_filter")) as (_twin, url):
        with pytest.raises(ModelRefused) as info:
            await client(url).complete(ModelRequest([Message.user("x")]))
    assert info.value.reason == "content_filter"


async def test_a_filtered_stream_is_a_refusal_at_its_start() -> None:
    async with twin_at(TwinReply("never")) as (_twin, url):
        with pytest.raises(ModelRefused):
            [e async for e in client(url).stream(ModelRequest([Message.user("FORBIDDEN")]))]


async def test_a_wrong_key_is_auth_error_with_phase_and_no_key_in_it() -> None:
    async with twin_at(TwinReply("never")) as (_twin, url):
        wrong = build_client(
            Settings(
                provider="azure",
                model="gpt-4o-mini",
                base_url=url,
                api_key="nope-key-1234",
                max_retries=0,
            )
        )
        with pytest.raises(AuthError) as info:
            await wrong.complete(ModelRequest([Message.user("x")]))
    error = info.value
    assert error.status_code == 401 and error.phase is not None and error.request_sent is True
    assert "nope-key-1234" not in str(error) + repr(error)


async def test_an_unknown_deployment_is_model_not_found() -> None:
    async with twin_at(TwinReply("never")) as (_twin, url):
        with pytest.raises(ModelNotFound):
            await client(url, model="gpt-5-mini").complete(ModelRequest([Message.user("x")]))


def test_no_endpoint_and_no_model_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError) as info:
        build_client(Settings(provider="azure", model="d"))
    assert "AZURE_OPENAI_ENDPOINT" in str(info.value)
    with pytest.raises(ConfigurationError) as info:
        build_client(Settings(provider="azure", base_url="https://r.openai.azure.com"))
    assert info.value.field == "model"


@pytest.mark.parametrize("name", ["../admin", "a?b=1", "dep/other"])
def test_a_deployment_that_is_no_path_segment_is_refused(name: str) -> None:
    with pytest.raises(ConfigurationError):
        AzureOpenAIClient(name, endpoint="https://r.openai.azure.com", api_version="2024-10-21")


def test_a_route_field_the_provider_has_no_use_for_is_refused() -> None:
    with pytest.raises(ConfigurationError) as info:
        build_client(Settings(provider="azure", model="d", region="us-east-1"))
    assert info.value.field == "region" and "bedrock" in str(info.value)
    with pytest.raises(ConfigurationError) as info:
        build_client(Settings(provider="openai", api_version="2024-10-21", api_key="k"))
    assert info.value.field == "api_version"


_OPEN: list[ClosableModelClient] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    """Close every client a test built, on the test's own loop."""
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def client(*args: Any, **kwargs: Any) -> Any:
    """A client as ``_client_unclosed`` builds it, closed after the test."""
    built = _client_unclosed(*args, **kwargs)
    _OPEN.append(built)
    return built
