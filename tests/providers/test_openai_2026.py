"""OpenAI's late-2026 models through the public API against the OpenAI twins (issue 40).

The breaks issue 40 lists: ``xhigh`` and ``max`` could never be set; ``gpt-6*`` fell to a
generic row (effort refused, ``temperature=0.2`` sent to a reasoning model); the Responses
adapter dropped an assistant message's ``phase`` on replay; reasoning items went to another
organisation's endpoint (``invalid_encrypted_content``). The twins (``twins/openai_responses``,
``twins/openai_chat``) answer with OpenAI's own 400s; every test here goes through
``build_client`` and ``Agent`` over real HTTP on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.errors import BadRequestError, ConfigurationError
from agentloop.messages import Message, TextPart, ThinkingPart
from agentloop.model import ModelClient, ModelRequest, ModelSettings
from agentloop.providers.fallback import FallbackClient
from agentloop.providers.openai._responses_request import encode_request, endpoint_origin
from agentloop.providers.profiles import profile_for
from agentloop.providers.settings import Settings, build_client

from .conftest import serve_app
from .twins.openai_chat import OpenAIChatTwin
from .twins.openai_chat import TwinReply as ChatReply
from .twins.openai_responses import UNVERIFIED, Refusal, Reply, ResponsesTwin, encrypt


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@asynccontextmanager
async def responses(*replies: Reply, secret: bytes = b"twin-secret") -> AsyncIterator[Any]:
    twin = ResponsesTwin(*replies, secret=secret)
    async with serve_app(twin.app()) as url:
        twin.url = f"{url}/v1"  # type: ignore[attr-defined]
        yield twin


def client(twin: Any, model: str) -> ModelClient:
    return build_client(
        Settings(
            provider="openai",
            api="responses",
            model=model,
            api_key=twin.key,
            base_url=twin.url,
            max_retries=0,
        )
    )


def agent(model: ModelClient, **settings: Any) -> Agent:
    return Agent(model, tools=[look], config=RunConfig(model_settings=ModelSettings(**settings)))


CALL_THEN_ANSWER = (Reply(calls=[("look", {"q": "x"})]), Reply(text="It is x."))


@pytest.mark.parametrize(
    ("model", "effort"),
    [
        ("gpt-5.2", "xhigh"),
        ("gpt-5.6-terra", "xhigh"),
        ("gpt-5.1-codex-max", "xhigh"),
        ("gpt-5.6-sol", "max"),
        ("gpt-6-luna", "high"),
        ("gpt-6.1-sol", "max"),
        ("gpt-7", "xhigh"),  # an unknown name: the newest family's row
    ],
)
async def test_new_efforts_reach_the_models_that_take_them(model: str, effort: str) -> None:
    async with responses(*CALL_THEN_ANSWER) as twin:
        run = await agent(client(twin, model), reasoning_effort=effort).run("x?")
    assert run.output == "It is x." and [r.status for r in twin.received] == [200, 200]
    assert all(body["reasoning"]["effort"] == effort for body in twin.accepted)


@pytest.mark.parametrize(
    ("model", "effort"),
    [
        ("gpt-5.6-terra", "max"),
        ("gpt-5.6-luna", "max"),
        ("gpt-5.2", "minimal"),
        ("gpt-5.1", "xhigh"),
        ("gpt-5", "none"),
        ("gpt-5-pro", "medium"),
        ("o3", "xhigh"),
    ],
)
async def test_an_effort_the_model_lacks_is_refused_before_sending(model: str, effort: str) -> None:
    async with responses() as twin:
        with pytest.raises(ConfigurationError) as info:
            await agent(client(twin, model), reasoning_effort=effort).run("x?")
    assert twin.received == [] and info.value.field == "reasoning_effort"
    assert model in str(info.value) and repr(effort) in str(info.value)


async def test_the_twin_answers_max_on_terra_with_openais_400() -> None:
    """What sneaks past the profile (``extra_body``) gets OpenAI's own words."""
    async with responses() as twin:
        settings = {"extra_body": {"reasoning": {"effort": "max"}}}
        with pytest.raises(BadRequestError) as info:
            await agent(client(twin, "gpt-5.6-terra"), **settings).run("x?")
    assert (
        "Unsupported value: 'reasoning_effort' does not support 'max' with this model. Supported "
        "values are: 'none', 'low', 'medium', 'high', and 'xhigh'." in str(info.value)
    )


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_temperature_on_gpt_6_is_refused_before_sending(api: str) -> None:
    """gpt-6* reasons by default: sampling is a ConfigurationError, never the 400."""
    chat = OpenAIChatTwin([ChatReply(text="hi")])
    async with serve_app(chat.app()) as url, responses(Reply(text="hi")) as twin:
        model = build_client(
            Settings(
                provider="openai",
                api=api,
                model="gpt-6-luna",
                api_key=twin.key,
                base_url=twin.url if api == "responses" else f"{url}/v1",
                max_retries=0,
            )
        )
        with pytest.raises(ConfigurationError) as info:
            await agent(model, temperature=0.2).run("x?")
    assert twin.received == [] and chat.requests == []
    assert info.value.field == "temperature" and "gpt-6-luna" in str(info.value)


async def test_the_chat_twin_answers_temperature_on_gpt_6_with_openais_400() -> None:
    chat = OpenAIChatTwin([])
    async with serve_app(chat.app()) as url:
        model = build_client(
            Settings(
                provider="openai",
                api="chat",
                model="gpt-6-luna",
                api_key="sk-x",
                base_url=f"{url}/v1",
                max_retries=0,
            )
        )
        with pytest.raises(BadRequestError) as info:
            await agent(model, extra_body={"temperature": 0.2}).run("x?")
    assert (
        "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default "
        "(1) value is supported." in str(info.value)
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_phase_is_kept_and_sent_back_on_every_later_request(stream: bool) -> None:
    preamble = Reply(text="Let me look.", calls=[("look", {"q": "x"})])
    replies = (preamble, Reply(text="It is x."), Reply(text="Still x."))
    async with responses(*replies) as twin:
        runner = agent(client(twin, "gpt-5.6-terra"))
        if stream:
            async with runner.stream("x?") as events:
                async for _ in events:
                    pass
            first = events.run
        else:
            first = await runner.run("x?")
        phases = [m.phase for m in first.messages if m.role == "assistant"]
        restored = [Message.from_dict(m.to_dict()) for m in first.messages]
        second = await runner.run("again?", history=restored)
    assert phases == ["commentary", "final_answer"] and second.output == "Still x."
    assert twin.unphased == [] and [r.status for r in twin.received] == [200, 200, 200]
    sent = [i for i in twin.accepted[2]["input"] if i.get("role") == "assistant"]
    assert [i["phase"] for i in sent] == ["commentary", "final_answer"]


async def test_reasoning_is_not_replayed_to_another_organisation_after_a_fallback() -> None:
    """Twin B signs with another organisation's secret: A's blobs are a 400 there."""
    down = Reply(status=503, error={"error": {"message": "overloaded", "type": "server_error"}})
    async with (
        responses(CALL_THEN_ANSWER[0], down, secret=b"org-a") as first,
        responses(Reply(text="It is x."), secret=b"org-b") as second,
    ):
        fallback = FallbackClient([client(first, "gpt-5.2"), client(second, "gpt-5.2")])
        run = await agent(fallback, reasoning_effort="low").run("x?")
    assert run.output == "It is x." and [r.status for r in second.received] == [200]
    items = second.accepted[0]["input"]
    assert [i.get("type", "message") for i in items] == [
        "message",
        "function_call",
        "function_call_output",
    ]
    thought = run.messages[1].thinking[0]
    assert thought.origin is not None and thought.origin.startswith("127.0.0.1:")


def test_another_organisations_blob_is_the_twins_invalid_encrypted_content() -> None:
    blob = encrypt("rs_a1", b"org-a")
    item = {"type": "reasoning", "id": "rs_a1", "summary": [], "encrypted_content": blob}
    with pytest.raises(Refusal) as info:
        ResponsesTwin(secret=b"org-b").check({"model": "gpt-5.2", "store": False, "input": [item]})
    assert info.value.message == UNVERIFIED.format(short=f"{blob[:4]}...{blob[-4:]}")
    assert info.value.code == "invalid_encrypted_content"


def test_endpoint_origins_tell_hosts_keys_and_organisations_apart() -> None:
    openai = endpoint_origin("https://api.openai.com/v1", "sk-a")
    assert openai.startswith("api.openai.com/") and "sk-a" not in openai
    assert openai == endpoint_origin("https://API.openai.com/v1/", "sk-a")
    others = {
        endpoint_origin("https://res.openai.azure.com/openai/v1", "sk-a"),
        endpoint_origin("https://api.openai.com/v1", "sk-b"),
        endpoint_origin("https://api.openai.com/v1", "sk-a", {"OpenAI-Organization": "org-2"}),
    }
    assert openai not in others and len(others) == 3


def test_old_reasoning_parts_without_an_origin_still_go_back() -> None:
    old = Message.from_dict(
        {"role": "assistant", "parts": [
            {"type": "thinking", "text": "", "signature": "e", "provider": "openai", "id": "rs_1"},
            {"type": "text", "text": "hi"},
        ]}
    )  # fmt: skip
    other = Message("assistant", (ThinkingPart("", signature="e2", provider="openai", id="rs_2",
                                               origin="elsewhere/0"), TextPart("yo")))  # fmt: skip
    request = ModelRequest(messages=(Message.user("a"), old, Message.user("b"), other))
    payload = encode_request(request, "gpt-5.2", origin="api.openai.com/1")
    assert [i.get("id") for i in payload["input"] if i["type"] == "reasoning"] == ["rs_1"]


@pytest.mark.parametrize(
    ("model", "efforts"),
    [
        ("gpt-5", {"minimal", "low", "medium", "high"}),
        ("gpt-5.1", {"none", "low", "medium", "high"}),
        ("gpt-5.4-mini", {"none", "low", "medium", "high", "xhigh"}),
        ("gpt-5.6-sol", {"none", "low", "medium", "high", "xhigh", "max"}),
        ("gpt-5-pro", {"high"}),
        ("gpt-6-luna", {"none", "low", "medium", "high", "xhigh"}),
        ("openai/gpt-6.1-terra", {"none", "low", "medium", "high", "xhigh"}),
    ],
)
def test_openai_rows_of_2026(model: str, efforts: set[str]) -> None:
    found = profile_for("openai", model)
    assert found.efforts == efforts and not found.sampling and found.thinks_by_default


async def test_a_filtered_handoff_sends_each_message_with_its_phase() -> None:
    """The filter's messages lose their calls and reasoning (SPEC 26), never their phase (16)."""
    from agentloop import handoff
    from agentloop.handoffs import remove_tool_calls

    replies = (
        Reply(text="Let me look.", calls=[("look", {"q": "x"})]),
        Reply(text="Handing over.", calls=[("transfer_to_helper", {})]),
        Reply(text="Helped."),
    )
    async with responses(*replies) as twin:
        model = client(twin, "gpt-5.6-terra")
        helper = Agent(model, name="helper", instructions="You help.")
        filtered = handoff(helper, input_filter=remove_tool_calls)
        front = Agent(model, tools=[look], handoffs=[filtered])
        run = await front.run("x?")
    assert run.output == "Helped." and run.last_agent == "helper"
    assert twin.unphased == [] and [r.status for r in twin.received] == [200, 200, 200]
    sent = [i for i in twin.accepted[2]["input"] if i.get("role") == "assistant"]
    assert [i["phase"] for i in sent] == ["commentary"]  # the turn before the transfer
