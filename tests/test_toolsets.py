"""Tool sources listed at run time (the hook MCP servers use): listing, refresh, errors, close."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agentloop import Agent, tool
from agentloop.errors import ConfigurationError
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, ScriptedModel, call, reply
from agentloop.tools import FunctionTool, Tool, Toolset


def make(name: str, text: str) -> FunctionTool:
    def fn() -> str:
        return text

    return FunctionTool(fn, name=name, description=f"{name} tool")


class Source:
    def __init__(self, *tools: Tool, fail: Exception | None = None) -> None:
        self.name = "src"
        self.version = 0
        self.tools = list(tools)
        self.fail = fail
        self.listed = 0
        self.closed = 0

    async def list_tools(self) -> Sequence[Tool]:
        self.listed += 1
        if self.fail is not None:
            raise self.fail
        return self.tools

    async def aclose(self) -> None:
        self.closed += 1


def names(request: ModelRequest) -> list[str]:
    return [s.name for s in request.tools]


def test_a_source_is_a_toolset() -> None:
    assert isinstance(Source(), Toolset)


async def test_tools_are_listed_when_a_run_starts_and_dispatched() -> None:
    source = Source(make("ping", "pong"))
    model = ScriptedModel([call("ping"), reply("ok")])
    agent = Agent(model, tools=[source])
    await agent.run("go")
    assert names(model.requests[0]) == ["ping"]
    assert model.requests[1].messages[-1].tool_results_parts[0].content == "pong"
    assert source.listed == 1


async def test_a_changed_source_is_listed_again_before_the_next_model_call() -> None:
    source = Source(make("a", "1"))

    def step(request: ModelRequest) -> object:
        if len(request.messages) == 1:
            source.tools = [make("b", "2")]
            source.version += 1
            return call("a")
        return reply("done")

    model = FunctionModel(step)
    await Agent(model, tools=[source]).run("go")
    assert [names(r) for r in model.requests] == [["a"], ["b"]]
    assert source.listed == 2


async def test_a_source_that_cannot_list_at_start_is_a_configuration_error() -> None:
    source = Source(fail=OSError("server exited: bad flag"))
    agent = Agent(ScriptedModel([reply("never")]), tools=[source])
    with pytest.raises(ConfigurationError, match="'src' could not list its tools: OSError"):
        await agent.run("go")


async def test_a_failed_refresh_mid_run_keeps_the_old_tools() -> None:
    source = Source(make("a", "1"))

    def step(request: ModelRequest) -> object:
        if len(request.messages) == 1:
            source.fail = OSError("gone")
            source.version += 1
            return call("a")
        return reply("done")

    model = FunctionModel(step)
    run = await Agent(model, tools=[source]).run("go")
    assert run.output == "done" and names(model.requests[1]) == ["a"]


async def test_a_name_clash_is_a_configuration_error() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "local"

    agent = Agent(ScriptedModel([reply("x")]), tools=[ping, Source(make("ping", "remote"))])
    with pytest.raises(ConfigurationError, match="'ping', a name already taken"):
        await agent.run("go")


async def test_aclose_closes_sources_and_the_client() -> None:
    source = Source()
    model = ScriptedModel([reply("x")])
    async with Agent(model, tools=[source]) as agent:
        await agent.run("go")
    assert source.closed == 1 and model.closed


def test_close_after_run_sync_stops_sources_too() -> None:
    source = Source(make("ping", "pong"))
    model = ScriptedModel([call("ping"), reply("ok")])
    with Agent(model, tools=[source]) as agent:
        agent.run_sync("go")
    assert source.closed == 1 and model.closed
