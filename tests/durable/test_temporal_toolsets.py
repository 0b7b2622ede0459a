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
