"""Toolsets and tool search in a ``DBOSAgent`` (SPEC 22): a toolset's tool is a DBOS step,
``search_tools`` is not (it runs again on a replay, so the replay loads what the run loaded)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")

from dbos import DBOS

from agentloop import Agent, tool
from agentloop.durable.dbos import DBOSAgent
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call, reply
from agentloop.toolsets import FunctionToolset

ran: list[str] = []


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    ran.append(f"{a}x{b}")
    return a * b


def _steps(request: ModelRequest) -> Any:
    results = [p for m in request.messages for p in m.tool_results_parts]
    if not results:
        return call("search_tools", {"query": "multiply numbers"})
    if len(results) == 1:
        assert "multiply" in [s.name for s in request.tools]
        return call("multiply", {"a": 6, "b": 7})
    return reply(f"product: {results[-1].content}")


@pytest.fixture
def dbos_url(tmp_path: Path) -> Iterator[str]:
    ran.clear()
    yield f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS.destroy(destroy_registry=True)


async def test_a_deferred_toolset_is_searched_and_its_tool_is_a_step(dbos_url: str) -> None:
    math = FunctionToolset([multiply], name="math").deferred()
    durable = DBOSAgent(Agent(FunctionModel(_steps), toolsets=[math]), name="math")
    DBOS(config={"name": "agentloop-tests", "system_database_url": dbos_url, "log_level": "ERROR"})
    DBOS.launch()
    run = await durable.run("6 x 7", workflow_id="wf-math")
    assert run.output == "product: 42" and run.loaded_tools == ["multiply"]
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async("wf-math")]
    assert steps == ["math.model", "math.model", "math.tool.multiply", "math.model"]
    last = len(steps)
    again = await (await DBOS.fork_workflow_async("wf-math", last + 1)).get_result()
    assert ran == ["6x7"]  # the replay ran no tool again
    assert again.output == run.output and again.loaded_tools == ["multiply"]


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    ran.append(city)
    return f"sunny in {city}"


async def test_a_native_search_is_recorded_on_a_replay_too(dbos_url: str) -> None:
    from agentloop.providers.anthropic import AnthropicClient
    from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

    script = [
        FakeReply(tool_search={"query": "weather", "found": ["get_weather"]},
                  tool_calls=[FakeToolCall("get_weather", {"city": "Oslo"})]),
        FakeReply("Sunny in Oslo."),
    ]  # fmt: skip
    office = FunctionToolset([get_weather], name="office").deferred()
    async with FakeProviderServer(script) as server:
        client = AnthropicClient("claude-sonnet-4-5", api_key="sk-ant-x", base_url=server.root_url)
        durable = DBOSAgent(Agent(client, toolsets=[office]), name="office")
        DBOS(config={"name": "agentloop-tests", "system_database_url": dbos_url,
                     "log_level": "ERROR"})  # fmt: skip
        DBOS.launch()
        run = await durable.run("weather?", workflow_id="wf-office")
        steps = await DBOS.list_workflow_steps_async("wf-office")
        again = await (await DBOS.fork_workflow_async("wf-office", len(steps) + 1)).get_result()
        await client.aclose()
    assert run.loaded_tools == ["get_weather"] and again.loaded_tools == ["get_weather"]
    assert ran == ["Oslo"] and len(server.requests) == 2  # the replay asked and ran nothing
