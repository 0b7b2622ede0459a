"""A tool name over 64 chars or outside ``[A-Za-z0-9_-]`` is a ``ConfigurationError`` (SPEC 22).

Every offered tool: plain tools (at construction, ``@agent.tool``, ``override``), agent tools
(``as_tool``), and an MCP server's listed tools (at run start; a bad name listed mid-run is
skipped with a warning, as a colliding one is).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from agentloop import Agent, tool
from agentloop.engine.toolsets import Toolsets
from agentloop.errors import ConfigurationError
from agentloop.mcp import MCPServer
from agentloop.testing import ScriptedModel, reply
from agentloop.tools import Tool, ToolRegistry

SERVERS = Path(__file__).parent / "mcp_servers"


def f() -> str:
    """Answers."""
    return "ok"


def model() -> ScriptedModel:
    return ScriptedModel([reply("ok")])


@pytest.mark.parametrize("bad", ["a" * 65, "a b", "read.file", "é"])
def test_a_plain_tool_with_a_bad_name_is_refused_at_construction(bad: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"tool name '{bad}' must be 1-64") as refused:
        Agent(model(), tools=[tool(name=bad)(f)])
    assert refused.value.field == "tools"
    with pytest.raises(ConfigurationError, match="must be 1-64"):
        Agent(model(), tools=[_Named(bad)])


def test_64_characters_of_the_alphabet_pass() -> None:
    name = "A-z_0" + "a" * 59
    agent = Agent(model(), tools=[tool(name=name)(f)])
    assert name in agent.registry


def test_a_registry_is_checked_too() -> None:
    with pytest.raises(ConfigurationError, match="'a b'"):
        Agent(model(), tools=ToolRegistry([tool(name="a b")(f)]))


def test_agent_tool_and_override_are_checked() -> None:
    agent = Agent(model())
    with pytest.raises(ConfigurationError, match="'a b'"):
        agent.tool(name="a b")(f)
    with pytest.raises(ConfigurationError, match="'a b'"):
        with agent.override(tools=[tool(name="a b")(f)]):
            pass


def test_an_agent_tool_with_a_bad_name_is_refused_by_as_tool() -> None:
    child = Agent(model())
    with pytest.raises(ConfigurationError, match="'research agent'") as refused:
        child.as_tool(name="research agent", description="Researches.")
    assert refused.value.field == "name"
    assert child.as_tool(name="research", description="Researches.").name == "research"


async def test_an_mcp_tool_with_a_bad_name_is_refused_when_a_run_starts() -> None:
    server = MCPServer.stdio(
        sys.executable, [str(SERVERS / "raw.py")], env={"RAW_TOOL_NAME": "read.file"}, name="raw"
    )
    for agent in (Agent(model(), tools=[server]), Agent(model(), toolsets=[server])):
        async with agent:
            with pytest.raises(ConfigurationError, match=r"'read\.file'"):
                await agent.run("go")


class _Named(Tool):
    """A hand-made tool with any name."""

    def __init__(self, name: str) -> None:
        self.name, self.description, self.parameters = name, "x", {"type": "object"}
        self.timeout = None


class _Source:
    """A listed tool source (pure logic: what the registry keeps of a listing)."""

    name = "src"
    version = 1

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = tools

    async def list_tools(self) -> Sequence[Tool]:
        return self.tools

    async def aclose(self) -> None:
        return None


async def test_a_bad_name_listed_mid_run_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()
    source = _Source([tool(name="good")(f), _Named("bad name")])
    sets = Toolsets([source], registry)
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        assert await sets.refresh(starting=False)
    assert registry.names() == ["good"]
    assert "'bad name' must be 1-64" in caplog.text
    source.version = 2
    with pytest.raises(ConfigurationError, match="'bad name'"):
        await Toolsets([source], ToolRegistry()).refresh(starting=True)


async def test_a_bad_name_a_toolset_lists_mid_run_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As an MCP server's ``tools/list_changed`` can bring: the newcomer is skipped (WARNING)."""
    from agentloop.testing import call
    from agentloop.toolsets import AbstractToolset, Entry, Scope

    class Growing(AbstractToolset):
        name = "growing"

        async def entries(self, scope: Scope) -> list[Entry]:
            later = [_Named("bad name")] if scope.ctx.turn > 0 else []
            return [Entry.of(t, self.name) for t in [tool(name="first")(f), *later]]

    model = ScriptedModel([call("first", {}), reply("ok")])
    agent = Agent(model, toolsets=[Growing()])
    with caplog.at_level(logging.WARNING, logger="agentloop"):
        run = await agent.run("go")
    assert run.output == "ok"
    assert [[s.name for s in r.tools] for r in model.requests] == [["first"], ["first"]]
    assert "'bad name' must be 1-64" in caplog.text and "newcomer is skipped" in caplog.text
