"""Gemini's late-2026 models through the public API against the Gemini twin (issue 40).

Issue 40's Gemini breaks: ``minimal`` reached Gemini 3.8 Flash (LOW/MEDIUM/HIGH only) and got
a 400; a thought signature went to another Gemini model after a fallback ("Invalid thought
signature."). The twin (``twins/gemini.py``) answers both as Gemini does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.errors import BadRequestError, ConfigurationError
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart
from agentloop.model import ModelClient, ModelRequest, ModelSettings
from agentloop.providers.fallback import FallbackClient
from agentloop.providers.gemini import build_payload
from agentloop.providers.profiles import profile_for
from agentloop.providers.settings import Settings, build_client

from .conftest import serve_app
from .twins.gemini import BYPASS, GeminiTwin, Reply, call, text

KEY = "twin-key"


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@asynccontextmanager
async def twin_at(*replies: Reply) -> AsyncIterator[tuple[GeminiTwin, str]]:
    twin = GeminiTwin(*replies, key=KEY)
    async with serve_app(twin.app()) as url:
        yield twin, f"{url}/v1beta"


def client(url: str, model: str) -> ModelClient:
    return build_client(
        Settings(provider="gemini", model=model, api_key=KEY, base_url=url, max_retries=0)
    )


def agent(model: ModelClient, **settings: object) -> Agent:
    config = RunConfig(model_settings=ModelSettings(**settings))  # type: ignore[arg-type]
    return Agent(model, tools=[read_file], config=config)


@pytest.mark.parametrize("model", ["gemini-3.8-flash", "gemini-3.7-flash", "gemini-4-pro"])
async def test_minimal_on_the_newest_flash_is_refused_before_sending(model: str) -> None:
    async with twin_at(Reply([text("hi")])) as (twin, url):
        with pytest.raises(ConfigurationError) as info:
            await agent(client(url, model), reasoning_effort="minimal").run("hi")
    assert twin.received == [] and info.value.field == "reasoning_effort"
    assert model in str(info.value) and "'minimal'" in str(info.value)


@pytest.mark.parametrize(
    ("model", "effort"),
    [
        ("gemini-3.8-flash", "low"),
        ("gemini-3.8-flash", "high"),
        ("gemini-3.1-pro-preview", "medium"),
        ("gemini-3-flash-preview", "minimal"),
        ("gemini-4-pro", "medium"),  # an unknown name: the newest family's row
    ],
)
async def test_levels_reach_the_models_that_take_them(model: str, effort: str) -> None:
    async with twin_at(Reply([text("hi")])) as (twin, url):
        run = await agent(client(url, model), reasoning_effort=effort).run("hi")
    assert run.output == "hi" and [r.status for r in twin.received] == [200]
    thinking = twin.received[0].body["generationConfig"]["thinkingConfig"]
    assert thinking == {"thinkingLevel": effort.upper(), "includeThoughts": True}


async def test_the_twin_answers_minimal_on_3_8_flash_with_geminis_400() -> None:
    extra = {"generationConfig": {"thinkingConfig": {"thinkingLevel": "MINIMAL"}}}
    async with twin_at() as (_, url):
        with pytest.raises(BadRequestError) as info:
            await agent(client(url, "gemini-3.8-flash"), extra_body=extra).run("hi")
    assert "Thinking level is not supported for this model." in str(info.value)


@pytest.mark.parametrize("stream", [False, True])
async def test_signatures_stay_with_their_model_after_a_fallback(stream: bool) -> None:
    """3.1 Pro signs a call, fails mid-turn; 3.8 Flash gets the bypass, not Pro's signature."""
    script = (
        Reply([call("read_file", {"path": "a.txt"})]),
        Reply.failing(503, "The model is overloaded."),
        Reply([text("It says hi.")]),
    )
    async with twin_at(*script) as (twin, url):
        fallback = FallbackClient(
            [client(url, "gemini-3.1-pro-preview"), client(url, "gemini-3.8-flash")]
        )
        runner = agent(fallback)
        if stream:
            async with runner.stream("read a.txt") as events:
                async for _ in events:
                    pass
            run = events.run
        else:
            run = await runner.run("read a.txt")
    assert run.output == "It says hi."
    assert [(r.model, r.status) for r in twin.received] == [
        ("gemini-3.1-pro-preview", 200),
        ("gemini-3.1-pro-preview", 503),
        ("gemini-3.8-flash", 200),
    ]
    signed = run.messages[1].thinking[0]
    host = url.removeprefix("http://").split("/")[0]
    assert signed.origin == f"gemini-3.1-pro-preview|gemini:{host}" and signed.signature
    model_turn = twin.received[2].body["contents"][1]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0]["thoughtSignature"] == BYPASS
    assert signed.signature not in str(twin.received[2].body)


def test_a_signature_goes_back_to_the_model_that_wrote_it_and_old_ones_to_any() -> None:
    mine = ThinkingPart("", signature="S1", provider="gemini", origin="gemini-3.8-flash")
    old = ThinkingPart("", signature="S0", provider="gemini")  # stored before origins
    history = (
        Message.user("go"),
        Message("assistant", (mine, ToolCallPart("c1", "read_file", {"path": "a"}))),
        Message.user("again"),
        Message("assistant", (old, TextPart("ok"))),
    )
    same = build_payload(ModelRequest(messages=history), "gemini-3.8-flash")["contents"]
    other = build_payload(ModelRequest(messages=history), "gemini-3.1-pro-preview")["contents"]
    assert same[1]["parts"][0]["thoughtSignature"] == "S1"
    assert other[1]["parts"][0]["thoughtSignature"] == BYPASS
    assert (
        same[3]["parts"][0]["thoughtSignature"] == "S0" == other[3]["parts"][0]["thoughtSignature"]
    )


@pytest.mark.parametrize(
    ("model", "levels", "budget"),
    [
        ("gemini-3.8-flash", {"low", "medium", "high"}, False),
        ("gemini-3.7-flash", {"low", "medium", "high"}, False),
        ("gemini-3.1-pro-preview", {"low", "medium", "high"}, False),
        ("gemini-3-flash-preview", {"minimal", "low", "medium", "high"}, False),
        ("gemini-3-pro-preview", {"low", "high"}, False),
        ("gemini-5-flash", {"low", "medium", "high"}, False),
        ("gemini-2.5-pro", set(), True),
    ],
)
def test_gemini_rows_of_2026(model: str, levels: set[str], budget: bool) -> None:
    found = profile_for("gemini", model)
    assert found.efforts == levels and found.thinking_budget == budget
    assert found.media == {"image", "document", "audio"}
