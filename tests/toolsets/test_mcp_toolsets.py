"""MCP servers as toolsets (SPEC 22 over SPEC 13), against the real servers in tests/mcp_servers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunContext
from agentloop.errors import ConfigurationError
from agentloop.mcp import MCPServer
from agentloop.model import ToolSpec
from agentloop.testing import ScriptedModel, call, reply

SERVER = Path(__file__).parents[1] / "mcp_servers" / "faulty.py"


def faulty(markers: Path, **options: Any) -> MCPServer:
    env = {"MARKER_DIR": str(markers)}
    return MCPServer.stdio(sys.executable, [str(SERVER)], env=env, name="faulty", **options)


def results(run: Any) -> list[str]:
    return [p.content for m in run.messages for p in m.tool_results_parts]


def names(request: Any) -> list[str]:
    return sorted(s.name for s in request.tools)


async def test_an_mcp_server_composes_as_a_toolset(tmp_path: Path) -> None:
    def arithmetic(ctx: RunContext[Any], spec: ToolSpec) -> bool:
        return spec.name in {"calc_add", "calc_echo"}

    server = faulty(tmp_path).prefixed("calc").filtered(arithmetic)
    model = ScriptedModel([call("calc_add", {"a": 2, "b": 3}), call("calc_crash"), reply("ok")])
    async with Agent(model, toolsets=[server]) as agent:
        run = await agent.run("go")
    assert names(model.requests[0]) == ["calc_add", "calc_echo"]
    assert results(run)[0] == "5"
    assert results(run)[1].startswith("tool 'calc_crash' is not available")


async def test_a_deferred_mcp_server_is_found_by_search(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            call("search_tools", {"query": "weather city"}),
            call("weather", {"city": "Oslo"}),
            reply("ok"),
        ]
    )
    async with Agent(model, toolsets=[faulty(tmp_path, defer_loading=True)]) as agent:
        run = await agent.run("go")
    assert names(model.requests[0]) == ["search_tools"]
    assert "faulty" in model.requests[0].tools[0].description
    assert "- weather: " in results(run)[0]
    assert '"celsius": 21' in results(run)[1].replace(":21", ": 21")
    assert run.loaded_tools[0] == "weather"


async def test_a_list_change_reaches_the_next_call(tmp_path: Path) -> None:
    model = ScriptedModel([call("fs_grow"), call("fs_late"), reply("done")])
    async with Agent(model, toolsets=[faulty(tmp_path).prefixed("fs")]) as agent:
        run = await agent.run("go")
    assert "fs_late" not in names(model.requests[0])
    assert "fs_late" in names(model.requests[1])
    assert results(run) == ["grown", "late tool"]


async def test_a_rename_of_a_tool_the_server_lacks_fails_at_run_start(tmp_path: Path) -> None:
    model = ScriptedModel([reply("never")])
    agent = Agent(model, toolsets=[faulty(tmp_path).renamed({"sum": "nope"})])
    with pytest.raises(ConfigurationError, match="has no tool named 'nope'"):
        await agent.run("go")
    await agent.aclose()
    assert model.requests == []


async def test_a_server_that_cannot_start_is_a_configuration_error(tmp_path: Path) -> None:
    broken = MCPServer.stdio(sys.executable, ["-c", "import sys; sys.exit(3)"], name="dead")
    with pytest.raises(ConfigurationError, match="dead"):
        await Agent(ScriptedModel([reply("never")]), toolsets=[broken.prefixed("x")]).run("go")


async def test_approval_required_on_a_server_pauses(tmp_path: Path) -> None:
    model = ScriptedModel([call("echo", {"text": "hi"}), reply("ok")])
    async with Agent(model, toolsets=[faulty(tmp_path).approval_required()]) as agent:
        run = await agent.run("go")
    assert run.paused and run.pending[0].call.name == "echo"
