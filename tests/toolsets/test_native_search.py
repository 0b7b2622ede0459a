"""SPEC 22's native tool search: Anthropic's BM25 tool search tool against the fake server.

Deferred tools go out with ``defer_loading: true`` beside ``tool_search_tool_bm25``; the
provider's search blocks come back as provider parts, sent back in place; the tools they
reference are recorded as loaded (``via="native"``); ``"native"`` refuses a model without it.
The fake server holds each request to Anthropic's rules with the API's 400 texts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.errors import BadRequestError, ConfigurationError
from agentloop.events import ToolsLoaded
from agentloop.messages import Message, ProviderToolCallPart, ProviderToolResultPart
from agentloop.model import ModelRequest, ToolSpec
from agentloop.providers import FallbackClient
from agentloop.providers.settings import Settings, build_client
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, ScriptedModel, reply
from agentloop.toolsets import AbstractToolset, FunctionToolset


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"sunny in {city}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email message."""
    return f"sent to {to}"


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def catalogue() -> AbstractToolset:
    return FunctionToolset([get_weather, send_email], name="office").deferred()


def claude(server: FakeProviderServer, model: str = "claude-sonnet-4-5") -> Any:
    settings = Settings(provider="anthropic", model=model, api_key="sk-ant-x",
                        base_url=server.root_url, max_retries=0)  # fmt: skip
    return build_client(settings)


def searched(*found: str, then: FakeReply | None = None) -> list[FakeReply]:
    first = FakeReply(
        tool_search={"query": "weather", "found": list(found)},
        tool_calls=(FakeToolCall("get_weather", {"city": "Oslo"}),),
    )
    return [first, then or FakeReply("Sunny in Oslo.")]


@pytest.mark.parametrize("stream", [False, True])
async def test_deferred_tools_go_out_deferred_beside_the_search_tool(stream: bool) -> None:
    async with FakeProviderServer(searched("get_weather")) as server:
        agent = Agent(claude(server), tools=[echo], toolsets=[catalogue()],
                      config=RunConfig(stream=stream))  # fmt: skip
        loads: list[ToolsLoaded] = []
        async with agent.stream("weather in Oslo?") as events:
            loads += [e async for e in events if isinstance(e, ToolsLoaded)]
        run = agent.runs[-1]
        await agent.aclose()
    assert run.output == "Sunny in Oslo."
    first = server.requests[0]["tools"]
    by_name = {t["name"]: t for t in first}
    search = {k: v for k, v in by_name["tool_search_tool_bm25"].items() if k != "cache_control"}
    assert search == {
        "type": "tool_search_tool_bm25_20251119",
        "name": "tool_search_tool_bm25",
    }
    assert by_name["get_weather"]["defer_loading"] is True
    assert by_name["send_email"]["defer_loading"] is True
    assert "defer_loading" not in by_name["echo"] and "search_tools" not in by_name
    # finding a tool changes nothing already sent: the same tools on the next request
    assert server.requests[1]["tools"] == first
    assert "anthropic-beta" not in server.received[0].headers
    assert run.loaded_tools == ["get_weather"]
    assert [(e.names, e.via) for e in loads] == [(("get_weather",), "native")]


async def test_the_search_blocks_are_provider_parts_sent_back_in_place() -> None:
    async with FakeProviderServer(searched("get_weather")) as server:
        agent = Agent(claude(server), toolsets=[catalogue()])
        run = await agent.run("weather in Oslo?")
        await agent.aclose()
    turn = next(m for m in run.messages if m.role == "assistant")
    call, result = turn.parts[:2]
    assert isinstance(call, ProviderToolCallPart) and call.name == "tool_search_tool_bm25"
    assert isinstance(result, ProviderToolResultPart) and result.name == "tool_search"
    sent = server.requests[1]["messages"][1]["content"]
    assert sent[:2] == [dict(call.raw or {}), dict(result.raw or {})]


async def test_auto_is_local_where_the_model_has_no_native_search() -> None:
    model = ScriptedModel([reply("ok")])
    await Agent(model, toolsets=[catalogue()]).run("go")
    sent = model.requests[0].tools
    assert sorted(s.name for s in sent) == ["search_tools"]
    assert not any(s.defer_loading for s in sent)


async def test_auto_is_local_on_a_claude_without_native_search() -> None:
    async with FakeProviderServer([FakeReply("ok")]) as server:
        agent = Agent(claude(server, "claude-3-5-sonnet-latest"), toolsets=[catalogue()])
        await agent.run("go")
        await agent.aclose()
    assert [t["name"] for t in server.requests[0]["tools"]] == ["search_tools"]


async def test_native_refuses_before_sending_where_a_model_has_none() -> None:
    async with FakeProviderServer([FakeReply("ok")]) as server:
        chain = FallbackClient([claude(server), claude(server, "claude-3-5-sonnet-latest")])
        with pytest.raises(ConfigurationError, match="'claude-3-5-sonnet-latest' has no native"):
            Agent(chain, toolsets=[catalogue()], config=RunConfig(tool_search="native"))
        native = Agent(claude(server), toolsets=[catalogue()],
                       config=RunConfig(tool_search="native"))  # fmt: skip
        with native.override(model=chain), pytest.raises(ConfigurationError, match="'native'"):
            await native.run("go")  # a run's model is checked at its start
        await native.aclose()
        await chain.aclose()
        assert server.requests == []


async def test_native_on_a_model_that_has_it() -> None:
    async with FakeProviderServer([FakeReply("ok")]) as server:
        agent = Agent(claude(server, "claude-opus-4-8"), toolsets=[catalogue()],
                      config=RunConfig(tool_search="native"))  # fmt: skip
        await agent.run("go")
        await agent.aclose()
    assert any(t.get("defer_loading") for t in server.requests[0]["tools"])


async def test_a_session_offers_what_a_native_search_loaded_later_too() -> None:
    script = [*searched("get_weather"), FakeReply("again")]
    async with FakeProviderServer(script) as server:
        agent = Agent(claude(server), toolsets=[catalogue()])
        await agent.run("weather?")
        later = await agent.run("and now?")
        await agent.aclose()
    assert agent.default_session.loaded_tools == {"get_weather"} and later.loaded_tools == []
    assert server.requests[2]["tools"] == server.requests[0]["tools"]


async def test_a_reference_to_an_undeclared_tool_is_the_providers_400() -> None:
    async with FakeProviderServer(searched("get_weather")) as server:
        client = claude(server)
        deferred = ToolSpec("get_weather", "weather", {"type": "object"}, defer_loading=True)
        first = await client.complete(
            ModelRequest(messages=[Message.user("x")], tools=[deferred, echo.spec()])
        )
        history = [Message.user("x"), first.message, Message.user("y")]
        with pytest.raises(BadRequestError, match="Tool reference 'get_weather' has no corr"):
            await client.complete(ModelRequest(messages=history, tools=[echo.spec()]))
        await client.aclose()


async def test_the_fake_server_holds_the_tools_to_anthropics_rules() -> None:
    deferred = ToolSpec("get_weather", "weather", {"type": "object"}, defer_loading=True)
    async with FakeProviderServer([FakeReply("ok")]) as server:
        client = claude(server)
        body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 10,
                                "messages": [{"role": "user", "content": "x"}]}  # fmt: skip
        url = server.root_url + "/v1/messages"
        function = {"name": "a", "input_schema": {"type": "object"}, "defer_loading": True}
        search = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25",
                  "defer_loading": True}  # fmt: skip
        async with httpx.AsyncClient() as http:
            alone = {**body, "tools": [function]}
            answer = await http.post(url, json=alone, headers={"x-api-key": "k"})
            assert answer.status_code == 400 and "tool search tool" in answer.text
            every = {**body, "tools": [function, search]}
            answer = await http.post(url, json=every, headers={"x-api-key": "k"})
            assert "All tools have defer_loading set." in answer.json()["error"]["message"]
        ok = await client.complete(ModelRequest(messages=[Message.user("x")], tools=[deferred]))
        assert ok.message.text == "ok"
        await client.aclose()


async def test_an_append_only_conversation_sees_no_tool_change_when_a_tool_is_found() -> None:
    script = searched("get_weather", then=FakeReply("Sunny.", thinking="ok"))
    script.append(FakeReply("Still sunny."))
    async with FakeProviderServer(script) as server:
        agent = Agent(claude(server, "claude-fable-5-1"), toolsets=[catalogue()])
        await agent.run("weather?")
        await agent.run("and now?")
        await agent.aclose()
    first, *later = server.requests
    for body in later:
        assert body["tools"] == first["tools"]
        assert all(m["role"] != "system" for m in body["messages"])  # no tool-change entry
    entries = [i for i, m in enumerate(agent.history) if m.role == "system"]
    assert entries == [0]  # the conversation's base, with the deferred tools; nothing later


def responses(server: FakeProviderServer, model: str = "gpt-5.4") -> Any:
    settings = Settings(provider="openai", model=model, api_key="sk-x", api="responses",
                        base_url=server.base_url, max_retries=0)  # fmt: skip
    return build_client(settings)


@pytest.mark.parametrize("stream", [False, True])
async def test_the_responses_api_searches_natively_from_gpt_5_4(stream: bool) -> None:
    async with FakeProviderServer([*searched("get_weather"), FakeReply("again")]) as server:
        agent = Agent(responses(server), tools=[echo], toolsets=[catalogue()],
                      config=RunConfig(stream=stream))  # fmt: skip
        run = await agent.run("weather in Oslo?")
        await agent.run("and now?")
        await agent.aclose()
    assert run.output == "Sunny in Oslo." and run.loaded_tools == ["get_weather"]
    first = server.requests[0]["tools"]
    assert {"type": "tool_search"} in first
    deferred = {t["name"]: t.get("defer_loading", False) for t in first if "name" in t}
    assert deferred == {"echo": False, "get_weather": True, "send_email": True}
    assert all(r["tools"] == first for r in server.requests[1:])
    kinds = [i["type"] for i in server.requests[2]["input"]]
    assert kinds[1:3] == ["tool_search_call", "tool_search_output"]  # back in place


async def test_the_responses_api_before_gpt_5_4_searches_locally() -> None:
    async with FakeProviderServer([FakeReply("ok")]) as server:
        agent = Agent(responses(server, "gpt-5.2"), toolsets=[catalogue()])
        await agent.run("go")
        await agent.aclose()
    assert [t["name"] for t in server.requests[0]["tools"]] == ["search_tools"]


async def test_a_search_in_the_answering_turn_is_recorded_too() -> None:
    script = [FakeReply("Found it.", tool_search={"query": "mail", "found": ["send_email"]})]
    async with FakeProviderServer(script) as server:
        agent = Agent(claude(server), toolsets=[catalogue()])
        run = await agent.run("can you email?")
        await agent.aclose()
    assert run.output == "Found it." and run.loaded_tools == ["send_email"]


async def test_a_native_load_is_stored_and_restored_with_the_session(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with FakeProviderServer([*searched("get_weather"), FakeReply("back")]) as server:
        with SQLiteStore(path) as store:
            agent = Agent(claude(server), toolsets=[catalogue()], store=store, session_id="s1")
            await agent.run("weather?")
            await agent.aclose()
        with SQLiteStore(path) as store:
            resumed = Agent.resume("s1", store=store, client=claude(server),
                                   toolsets=[catalogue()])  # fmt: skip
            assert resumed.default_session.loaded_tools == {"get_weather"}
            await resumed.run("again")
            await resumed.aclose()
    assert server.requests[2]["tools"] == server.requests[0]["tools"]


async def test_a_seeded_history_sends_every_definition_its_native_searches_referenced() -> None:
    async with FakeProviderServer([*searched("get_weather"), FakeReply("again")]) as server:
        first = Agent(claude(server), toolsets=[catalogue()])
        run = await first.run("weather?")
        await first.aclose()
        again = Agent(claude(server), toolsets=[catalogue()])
        await again.run("and now?", history=run.conversation)
        await again.aclose()
    assert server.requests[2]["tools"] == server.requests[0]["tools"]


async def test_a_deferred_tool_keeps_its_approval_when_offered_natively() -> None:
    gated = FunctionToolset([get_weather], name="office").deferred().approval_required()
    async with FakeProviderServer(searched("get_weather")) as server:
        agent = Agent(claude(server), tools=[echo], toolsets=[gated])
        run = await agent.run("weather in Oslo?")
        await agent.aclose()
    assert run.paused and run.pending[0].call.name == "get_weather"
