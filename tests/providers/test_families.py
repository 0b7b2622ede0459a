"""The OpenAI-compatible families as Settings rows and model strings (SPEC 24, issue 33)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentloop import Agent, tool
from agentloop.errors import AuthError, ConfigurationError
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import ClosableModelClient, ModelRequest, ModelSettings
from agentloop.providers._model_string import parse_model_string
from agentloop.providers.openai.families import FAMILIES, CompatibleClient, mistral_call_id
from agentloop.providers.settings import KEY_ENV_VARS, PROVIDERS, Settings, build_client
from agentloop.testing import FakeProviderServer, FakeReply

from .conftest import serve_app
from .twins.openai_chat import OpenAIChatTwin, TwinReply

NINE = re.compile(r"[A-Za-z0-9]{9}")


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return f"{term}: found"


def _family_unclosed(name: str, url: str, model: str | None = None) -> CompatibleClient:
    built = build_client(
        Settings(provider=name, model=model, api_key="fam-key", base_url=url, max_retries=0)
    )
    assert isinstance(built, CompatibleClient)
    return built


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_is_a_provider_with_its_key_and_base_url(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = FAMILIES[name]
    assert name in PROVIDERS and KEY_ENV_VARS[name] == row.key_var
    monkeypatch.delenv(row.key_var, raising=False)
    with pytest.raises(AuthError) as info:
        build_client(Settings(provider=name))
    assert str(info.value) == f"{row.key_var} is not set"
    monkeypatch.setenv(row.key_var, "k")
    built = build_client(Settings(provider=name, max_retries=0))
    assert isinstance(built, CompatibleClient)
    assert built.base_url == row.base_url and built.provider == name
    assert built.model == row.default_model
    assert parse_model_string(f"{name}:some-model") == (name, "some-model")


def test_hugging_face_reads_hf_token() -> None:
    assert KEY_ENV_VARS["huggingface"] == "HF_TOKEN"


async def test_mistral_gets_nine_character_call_ids_mapped_consistently() -> None:
    history = [
        Message.user("look it up"),
        Message("assistant", (ToolCallPart("call_abc123XYZ_long", "lookup", {"term": "x"}),)),
        Message("tool", (ToolResultPart("call_abc123XYZ_long", "lookup", "x: found"),)),
    ]
    twin = OpenAIChatTwin([TwinReply("done"), TwinReply("again")])
    async with serve_app(twin.app()) as url:
        mistral = family("mistral", f"{url}/v1", "mistral-small-latest")
        await mistral.complete(ModelRequest(history))
        await mistral.complete(ModelRequest(history))
    first, second = twin.accepted
    call_id = first["messages"][1]["tool_calls"][0]["id"]
    assert NINE.fullmatch(call_id) and call_id == mistral_call_id("call_abc123XYZ_long")
    assert first["messages"][2]["tool_call_id"] == call_id
    assert first == second  # the same ids on every request
    assert history[1].tool_calls[0].id == "call_abc123XYZ_long"  # the transcript is untouched


def test_mistral_keeps_its_own_ids() -> None:
    assert mistral_call_id("D681PevKs") == "D681PevKs"


async def test_a_family_runs_a_tool_loop_with_a_bearer_key() -> None:
    twin = OpenAIChatTwin([TwinReply(tool_calls=[("lookup", {"term": "y"})]), TwinReply("ok")])
    async with serve_app(twin.app()) as url:
        run = await Agent(family("groq", f"{url}/openai/v1", "llama-3.3-70b-versatile"),
                          tools=[lookup]).run("go")  # fmt: skip
    assert run.output == "ok" and twin.paths == ["/openai/v1/chat/completions"] * 2


@pytest.mark.parametrize(
    ("name", "model", "settings", "field"),
    [
        ("mistral", "mistral-large-latest", {"seed": 3}, "seed"),
        ("deepseek", "deepseek-chat", {"seed": 3}, "seed"),
        ("deepseek", "deepseek-reasoner", {"temperature": 0.2}, "temperature"),
        ("xai", "grok-4", {"stop": ("x",)}, "stop"),
        ("xai", "grok-3-mini", {"reasoning_effort": "medium"}, "reasoning_effort"),
        ("groq", "llama-3.3-70b-versatile", {"reasoning_effort": "low"}, "reasoning_effort"),
    ],
)
async def test_what_a_family_refuses_is_refused_before_sending(
    name: str, model: str, settings: dict[str, object], field: str
) -> None:
    twin = OpenAIChatTwin([TwinReply("never")])
    async with serve_app(twin.app()) as url:
        request = ModelRequest([Message.user("x")], settings=ModelSettings(**settings))  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError) as info:
            await family(name, f"{url}/v1", model).complete(request)
    assert twin.requests == [] and info.value.field == field


async def test_groq_reasoning_models_take_an_effort() -> None:
    async with FakeProviderServer([FakeReply("ok")]) as server:  # Groq's own twin is not here
        request = ModelRequest([Message.user("x")], settings=ModelSettings(reasoning_effort="low"))
        await family("groq", server.base_url, "openai/gpt-oss-120b").complete(request)
    assert server.requests[0]["reasoning_effort"] == "low"


_OPEN: list[ClosableModelClient] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    """Close every client a test built, on the test's own loop."""
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def family(*args: Any, **kwargs: Any) -> Any:
    """A client as ``_family_unclosed`` builds it, closed after the test."""
    built = _family_unclosed(*args, **kwargs)
    _OPEN.append(built)
    return built


def test_model_strings_build_the_new_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentloop import Agent
    from agentloop.providers import BedrockClient, RetryingClient

    monkeypatch.setenv("GROQ_API_KEY", "k")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "k")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    groq = Agent("groq:openai/gpt-oss-120b").client
    bedrock = Agent("bedrock:eu.anthropic.claude-sonnet-4-5-20250929-v1:0").client
    assert isinstance(groq, RetryingClient) and isinstance(groq.inner, CompatibleClient)
    assert groq.model == "openai/gpt-oss-120b" and groq.provider == "groq"
    assert isinstance(bedrock, RetryingClient) and isinstance(bedrock.inner, BedrockClient)
    assert bedrock.inner.endpoint == "https://bedrock-runtime.eu-west-1.amazonaws.com"
