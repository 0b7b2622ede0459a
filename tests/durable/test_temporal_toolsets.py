"""Toolsets and tool search in a ``TemporalAgent`` (SPEC 22): a toolset's tool is the tool
activity (the worker resolves it from the agent's toolsets), ``search_tools`` runs in the
workflow, and what it loads is offered on the next model call."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("temporalio", reason="TemporalAgent tests need the temporal extra")

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentloop import Agent, tool
from agentloop.durable.temporal import TemporalAgent
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call, reply
from agentloop.toolsets import FunctionToolset


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


def _steps(request: ModelRequest) -> Any:
    results = [p for m in request.messages for p in m.tool_results_parts]
    if not results:
        return call("search_tools", {"query": "multiply numbers"})
    if len(results) == 1:
        assert "multiply" in [s.name for s in request.tools]
        return call("multiply", {"a": 6, "b": 7})
    return reply(f"product: {results[-1].content}")


async def test_a_deferred_toolset_is_searched_and_run_as_an_activity(client: Client) -> None:
    math = FunctionToolset([multiply], name="math").deferred()
    durable = TemporalAgent(Agent(FunctionModel(_steps), toolsets=[math]), name="math")
    async with durable.worker(client):
        run = await durable.run("6 x 7", client=client, workflow_id="math-1")
    assert run.output == "product: 42"
    assert run.loaded_tools == ["multiply"]
    history = await client.get_workflow_handle("math-1").fetch_history()
    activities = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert activities == [
        "agentloop.math.model",
        "agentloop.math.model",
        "agentloop.math.tool",
        "agentloop.math.model",
    ]


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"sunny in {city}"


async def test_a_native_search_in_a_temporal_workflow(client: Client) -> None:
    from agentloop.providers.anthropic import AnthropicClient
    from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

    script = [
        FakeReply(tool_search={"query": "weather", "found": ["get_weather"]},
                  tool_calls=[FakeToolCall("get_weather", {"city": "Oslo"})]),
        FakeReply("Sunny in Oslo."),
    ]  # fmt: skip
    office = FunctionToolset([get_weather], name="office").deferred()
    async with FakeProviderServer(script) as server:
        model = AnthropicClient("claude-sonnet-4-5", api_key="sk-ant-x", base_url=server.root_url)
        durable = TemporalAgent(Agent(model, toolsets=[office]), name="office")
        async with durable.worker(client):
            run = await durable.run("weather?", client=client, workflow_id="office-1")
        await model.aclose()
    assert run.output == "Sunny in Oslo." and run.loaded_tools == ["get_weather"]
    first = server.requests[0]["tools"]
    assert any(t.get("defer_loading") for t in first) and server.requests[1]["tools"] == first
