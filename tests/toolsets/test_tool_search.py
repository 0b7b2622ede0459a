"""SPEC 22's deferred tools and local tool search: what is sent, loading, and what persists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, ModelSettings, RunConfig, tool
from agentloop.errors import ConfigurationError
from agentloop.events import ToolsLoaded
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.model import ModelRequest, ToolSpec
from agentloop.pausing import Approve
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import AbstractToolset, FunctionToolset, SearchIndex


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    More lines the search result leaves out.
    """
    return f"sunny in {city}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email message."""
    return f"sent to {to}"


@tool
def list_files(directory: str) -> str:
    """List the files in a directory."""
    return "a.txt"


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def catalogue() -> AbstractToolset:
    return FunctionToolset([get_weather, send_email, list_files], name="office").deferred()


def names(request: ModelRequest) -> list[str]:
    return sorted(s.name for s in request.tools)


def results(run: Any) -> list[str]:
    return [p.content for m in run.messages for p in m.tool_results_parts]


async def test_deferred_tools_are_not_sent_search_tools_is() -> None:
    model = ScriptedModel([reply("ok")])
    await Agent(model, tools=[echo], toolsets=[catalogue()]).run("go")
    assert names(model.requests[0]) == ["echo", "search_tools"]
    search = next(s for s in model.requests[0].tools if s.name == "search_tools")
    assert "3 more tools" in search.description and "office" in search.description
    for hidden in ("get_weather", "send_email", "list_files"):
        assert hidden not in search.description
    assert search.parameters["properties"]["limit"]["maximum"] == 20


async def test_a_search_loads_what_it_finds_for_the_next_step() -> None:
    model = ScriptedModel(
        [
            call("search_tools", {"query": "weather forecast"}),
            call("get_weather", {"city": "Oslo"}),
            reply("done"),
        ]
    )
    agent = Agent(model, toolsets=[catalogue()])
    events: list[ToolsLoaded] = []
    async with agent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolsLoaded):
                events.append(event)
    run = agent.runs[-1]
    found = results(run)[0]
    assert found.splitlines()[0].startswith("tools found: ")
    assert found.splitlines()[0].endswith("; callable from your next step:")
    assert "- get_weather: Get the current weather for a city." in found
    assert "More lines" not in found
    assert "get_weather" in names(model.requests[1])
    assert results(run)[1] == "sunny in Oslo"
    assert run.loaded_tools[0] == "get_weather"
    assert events and events[0].via == "search" and "get_weather" in events[0].names


async def test_no_match_is_soft_text() -> None:
    model = ScriptedModel([call("search_tools", {"query": "zzzz"}), reply("ok")])
    run = await Agent(model, toolsets=[catalogue()]).run("go")
    [result] = [p for m in run.messages for p in m.tool_results_parts]
    assert (result.content, result.is_error) == ("no tool matches 'zzzz'", True)
    assert run.output == "ok" and run.loaded_tools == []


@pytest.mark.parametrize("limit", [0, 21, "5"])
async def test_the_limit_is_1_to_20(limit: object) -> None:
    model = ScriptedModel([call("search_tools", {"query": "email", "limit": limit}), reply("ok")])
    run = await Agent(model, toolsets=[catalogue()]).run("go")
    assert results(run)[0].startswith("Invalid arguments for tool 'search_tools': limit")


async def test_a_call_to_an_unloaded_deferred_tool_loads_it() -> None:
    model = ScriptedModel(
        [
            call("send_email", {"to": "a", "body": "b"}),
            call("send_email", {"to": "a", "body": "b"}),
            reply("ok"),
        ]
    )
    run = await Agent(model, toolsets=[catalogue()]).run("go")
    assert results(run) == [
        "tool 'send_email' was not loaded; it is loaded now: call it again",
        "sent to a",
    ]
    assert "send_email" not in names(model.requests[0])
    assert "send_email" in names(model.requests[1])
    assert run.loaded_tools == ["send_email"]


async def test_loaded_tools_stay_for_the_sessions_later_runs() -> None:
    model = ScriptedModel(
        [call("send_email", {"to": "a", "body": "b"}), reply("ok"), reply("later")]
    )
    agent = Agent(model, toolsets=[catalogue()])
    await agent.run("go")
    second = await agent.run("again")
    assert "send_email" in names(model.requests[-1])
    assert second.loaded_tools == []
    assert agent.default_session.loaded_tools == {"send_email"}


async def test_loaded_tools_are_restored_from_the_store(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        model = ScriptedModel([call("list_files", {"directory": "."}), reply("ok")])
        agent = Agent(model, toolsets=[catalogue()], store=store, session_id="s1")
        await agent.run("go")
    with SQLiteStore(path) as store:
        model = ScriptedModel([reply("back")])
        resumed = Agent.resume("s1", store=store, client=model, toolsets=[catalogue()])
        await resumed.run("again")
    assert "list_files" in names(model.requests[0])


async def test_a_continued_paused_run_offers_what_it_loaded() -> None:
    gated = tool(requires_approval=True)(echo.func)
    model = ScriptedModel(
        [call("get_weather", {"city": "x"}), call("echo", {"text": "hi"}), reply("ok")]
    )
    agent = Agent(model, tools=[gated], toolsets=[catalogue()])
    run = await agent.run("go")
    assert run.paused
    await agent.continue_run(decisions={run.pending[0].call.id: Approve()})
    assert "get_weather" in names(model.requests[-1])


async def test_a_seeded_history_loads_what_its_searches_found() -> None:
    found = "tools found: 2; callable from your next step:\n- get_weather: w\n- gone_tool: g"
    history = [
        Message.user("hi"),
        Message("assistant", (ToolCallPart("c1", "search_tools", {"query": "weather"}),)),
        Message.tool_results([ToolResultPart("c1", "search_tools", found)]),
        Message("assistant", (Message.user("x").parts[0],)),
    ]
    model = ScriptedModel([reply("ok")])
    await Agent(model, toolsets=[catalogue()]).run("go", history=history)
    assert names(model.requests[0]) == ["get_weather", "search_tools"]


async def test_tool_search_off_sends_everything() -> None:
    model = ScriptedModel([reply("ok")])
    await Agent(model, toolsets=[catalogue()], config=RunConfig(tool_search="off")).run("go")
    assert names(model.requests[0]) == ["get_weather", "list_files", "send_email"]


async def test_defer_loading_on_a_tool_defers_it() -> None:
    lazy = tool(defer_loading=True)(send_email.func)
    model = ScriptedModel([reply("ok")])
    await Agent(model, tools=[echo, lazy]).run("go")
    assert names(model.requests[0]) == ["echo", "search_tools"]


async def test_tool_choice_naming_an_unloaded_deferred_tool_is_an_error() -> None:
    model = ScriptedModel([reply("never")])
    config = RunConfig(model_settings=ModelSettings(tool_choice="send_email"))
    with pytest.raises(ConfigurationError, match="tool_choice names 'send_email'"):
        await Agent(model, toolsets=[catalogue()], config=config).run("go")
    assert model.requests == []


async def test_a_user_tool_named_search_tools_is_an_error_when_search_is_on() -> None:
    mine = tool(name="search_tools", description="mine")(echo.func)
    with pytest.raises(ConfigurationError, match="the name of tool search's own tool"):
        await Agent(ScriptedModel([reply("x")]), tools=[mine], toolsets=[catalogue()]).run("go")


async def test_native_without_a_native_model_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="tool_search='native'"):
        Agent(
            ScriptedModel([reply("x")]),
            toolsets=[catalogue()],
            config=RunConfig(tool_search="native"),
        )


def test_bm25_ranks_names_split_on_case_and_separators() -> None:
    specs = [
        ToolSpec("getUserProfile", "Fetch a profile.", {"type": "object", "properties": {}}),
        ToolSpec("fs.read_file", "Read bytes.", {"type": "object", "properties": {"path": {}}}),
        ToolSpec("create-issue", "Open a ticket.", {"type": "object", "properties": {"title": {}}}),
    ]
    index = SearchIndex(specs)
    assert [s.name for s in index.search("user profile", 1)] == ["getUserProfile"]
    assert [s.name for s in index.search("read file", 1)] == ["fs.read_file"]
    assert [s.name for s in index.search("issue title", 1)] == ["create-issue"]
    assert index.search("path")[0].name == "fs.read_file"
    assert index.search("nothing here") == []


def test_search_over_10000_tools_finds_the_best_matches() -> None:
    """Correctness at scale; its speed (under 50 ms a query) is ``bench/toolsets.py``'s."""
    specs = [
        ToolSpec(
            f"service{i % 97}_action_{i}",
            f"Do thing number {i} for team {i % 13}",
            {"type": "object", "properties": {"id": {}, f"field{i % 7}": {}}},
        )
        for i in range(10_000)
    ]
    index = SearchIndex(specs)
    for query in ("team 7 thing", "service42 action", "field3 id"):
        assert len(index.search(query, 5)) == 5
    assert index.search("service42 action 42", 5)[0].name == "service42_action_42"


async def test_search_tools_stays_the_same_when_a_tool_loads() -> None:
    model = ScriptedModel([call("search_tools", {"query": "email"}), reply("ok")])
    await Agent(model, toolsets=[catalogue()]).run("go")
    first, second = ({s.name: s for s in r.tools}["search_tools"] for r in model.requests)
    assert first == second
    assert "send_email" in names(model.requests[1])
