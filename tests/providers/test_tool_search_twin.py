"""Native tool search (SPEC 22) against the Anthropic twin, which holds the API's rules.

The agent's deferred tools go out with ``defer_loading: true`` beside the BM25 search tool; the
twin's search blocks come back as provider parts and are sent back in place; a request that
breaks a rule (a reference to an undeclared tool, every tool deferred, a deferred tool without
the search tool) is the twin's 400.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.errors import BadRequestError
from agentloop.messages import Message, ProviderToolResultPart
from agentloop.model import ModelRequest, ToolSpec
from agentloop.providers.settings import Settings, build_client
from agentloop.toolsets import FunctionToolset

from .conftest import serve_app
from .twins import anthropic as twin
from .twins import anthropic_tool_search as ts
from .twins import openai_responses_search as rs
from .twins.anthropic import AnthropicTwin, TwinReply
from .twins.openai_responses import Reply as ResponsesReply
from .twins.openai_responses import ResponsesTwin

KEY = "sk-ant-twin-0123456789"


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"sunny in {city}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email message."""
    return f"sent to {to}"


def claude(url: str, model: str = "claude-opus-4-8") -> Any:
    return build_client(
        Settings(provider="anthropic", model=model, api_key=KEY, base_url=url, max_retries=0)
    )


def found_then_called() -> TwinReply:
    return TwinReply(
        [
            ts.tool_search_use("srvtoolu_ts1", "weather"),
            ts.tool_search_result("srvtoolu_ts1", ["get_weather"]),
            twin.tool_use("get_weather", {"city": "Oslo"}, "toolu_1"),
        ],
        stop_reason="tool_use",
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_native_search_round_trips_on_the_twin(stream: bool) -> None:
    script = [found_then_called(), TwinReply([twin.text("Sunny.")]),
              TwinReply([twin.text("Still.")])]  # fmt: skip
    catalogue = FunctionToolset([get_weather, send_email], name="office").deferred()
    async with AnthropicTwin(script) as server:
        agent = Agent(claude(server.url), toolsets=[catalogue], config=RunConfig(stream=stream))
        run = await agent.run("weather in Oslo?")
        await agent.run("and later?")
        await agent.aclose()
    assert server.rejected == [] and run.output == "Sunny." and run.loaded_tools == ["get_weather"]
    first = server.requests[0]["tools"]
    assert {t["name"]: t.get("defer_loading") for t in first} == {
        "get_weather": True,
        "send_email": True,
        "tool_search_tool_bm25": None,
    }
    sent = server.requests[2]["messages"][1]["content"][:2]
    assert [b["type"] for b in sent] == ["server_tool_use", "tool_search_tool_result"]
    assert all(r["tools"] == first for r in server.requests[1:])


async def test_the_twin_refuses_what_the_api_refuses() -> None:
    deferred = ToolSpec("get_weather", "weather", {"type": "object"}, defer_loading=True)
    async with AnthropicTwin([found_then_called()]) as server:
        client = claude(server.url)
        answer = await client.complete(
            ModelRequest(messages=[Message.user("x")], tools=[deferred, send_email.spec()])
        )
        assert isinstance(answer.message.parts[1], ProviderToolResultPart)
        later = [Message.user("x"), answer.message, Message.user("y")]
        with pytest.raises(BadRequestError, match="Tool reference 'get_weather' has no"):
            await client.complete(ModelRequest(messages=later, tools=[send_email.spec()]))
        await client.aclose()
    body = {"model": "claude-opus-4-8", "messages": [{"role": "user", "content": "x"}]}
    alone = {**body, "tools": [{"name": "a", "input_schema": {"type": "object"},
                                "defer_loading": True}]}  # fmt: skip
    assert ts.search_violation(alone) == ts.NO_SEARCH.format(k=0)
    search = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25",
              "defer_loading": True}  # fmt: skip
    every = {**body, "tools": [*alone["tools"], search]}
    assert ts.search_violation(every) == ts.EVERY_TOOL_DEFERRED


def responses(url: str, model: str) -> Any:
    return build_client(Settings(provider="openai", model=model, api_key="twin-key",
                                 base_url=url + "/v1", api="responses", max_retries=0))  # fmt: skip


def weather_tool() -> dict[str, Any]:
    return {"type": "function", "name": "get_weather", "description": "weather",
            "parameters": {"type": "object"}, "strict": False}  # fmt: skip


@pytest.mark.parametrize("stream", [False, True])
async def test_a_native_search_round_trips_on_the_responses_twin(stream: bool) -> None:
    items = rs.tool_search_items("call_ts1", ["get_weather"], [weather_tool()])
    state = ResponsesTwin(
        ResponsesReply(calls=[("get_weather", {"city": "Oslo"})], hosted=items),
        ResponsesReply(text="Sunny."),
        ResponsesReply(text="Still."),
    )
    catalogue = FunctionToolset([get_weather, send_email], name="office").deferred()
    async with serve_app(state.app()) as url:
        agent = Agent(responses(url, "gpt-5.4"), toolsets=[catalogue],
                      config=RunConfig(stream=stream))  # fmt: skip
        run = await agent.run("weather in Oslo?")
        await agent.run("and later?")
        await agent.aclose()
    assert run.output == "Sunny." and run.loaded_tools == ["get_weather"]
    sent = [r.body for r in state.received]
    assert all(r.status == 200 for r in state.received)
    assert {"type": "tool_search"} in sent[0]["tools"]
    kinds = [i.get("type") for i in sent[2]["input"]]
    assert "tool_search_call" in kinds and "tool_search_output" in kinds


async def test_the_responses_twin_refuses_what_the_rules_refuse() -> None:
    deferred = ToolSpec("get_weather", "weather", {"type": "object"}, defer_loading=True)
    state = ResponsesTwin(ResponsesReply(text="x"))
    async with serve_app(state.app()) as url:
        old = responses(url, "gpt-5.2")
        with pytest.raises(BadRequestError, match=r"gpt-5\.4 and later"):
            await old.complete(ModelRequest(messages=[Message.user("x")], tools=[deferred]))
        await old.aclose()
    body = {"input": [], "tools": [dict(weather_tool(), defer_loading=True)]}
    assert rs.search_problem(body, "gpt-5.4") == (rs.NO_SEARCH.format(k=0), "tools")
    items = rs.tool_search_items("c1", ["get_weather"], [weather_tool()])
    later = {"input": items, "tools": [{"type": "tool_search"}]}
    assert rs.search_problem(later, "gpt-5.4") == (
        rs.UNDECLARED.format(i=1, name="get_weather"),
        "input",
    )
