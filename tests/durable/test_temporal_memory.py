"""Memory under Temporal (SPEC 27, 14): memory tools run in the workflow, never as activities.

A staged write lives in the run, which lives in the workflow; a memory tool there is run again
on replay and stages the same write (its id derives from the call). Only model calls (and other
tools) are activities; the completed run's writes are applied once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="TemporalAgent tests need the temporal extra")

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentloop import Agent
from agentloop.durable.temporal import TemporalAgent
from agentloop.memory import Memory, SQLiteMemoryStore
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call, reply

NS = ("user", "ada")


def remembering(request: ModelRequest) -> Any:
    if len(request.messages) == 1:
        return call("remember", {"text": "Ada likes tea"})
    if len(request.messages) == 3:
        return call("recall", {"query": "tea"})
    return reply(request.messages[-1].tool_results_parts[0].content)


async def test_memory_tools_run_in_the_workflow(client: Client, tmp_path: Path) -> None:
    store = SQLiteMemoryStore(tmp_path / "memory.db")
    memory = Memory(store, namespace=lambda ctx: NS)
    durable = TemporalAgent(Agent(FunctionModel(remembering), memory=memory), name="memory")
    async with durable.worker(client):
        run = await durable.run("go", client=client, workflow_id="memory-1")
    assert str(run.output).endswith("] Ada likes tea")
    history = await client.get_workflow_handle("memory-1").fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == ["agentloop.memory.model"] * 3
    assert [i.text for i in await store.search(NS, "tea")] == ["Ada likes tea"]
    await store.aclose()
