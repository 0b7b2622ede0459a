"""Memory under DBOS (SPEC 27, 14): memory tools run inline in the workflow, never as steps.

A staged write lives in the run, not the store, so a memory tool must run where the run's state
is: in the workflow's own code, run again on replay (its write's id derives from the call, so
a replay stages the same write). The writes of the completed run are applied once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")

from dbos import DBOS

from agentloop import Agent
from agentloop.durable.dbos import DBOSAgent
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


@pytest.fixture
def dbos_url(tmp_path: Path) -> Iterator[str]:
    yield f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS.destroy(destroy_registry=True)


async def test_memory_tools_run_inline_and_the_run_s_writes_apply_once(
    dbos_url: str, tmp_path: Path
) -> None:
    store = SQLiteMemoryStore(tmp_path / "memory.db")
    memory = Memory(store, namespace=lambda ctx: ("user", ctx.deps))
    durable = DBOSAgent(Agent(FunctionModel(remembering), memory=memory), name="memory")
    assert {"remember", "recall", "forget"} <= durable.inline_tools
    DBOS(config={"name": "agentloop-tests", "system_database_url": dbos_url, "log_level": "ERROR"})
    DBOS.launch()
    run = await durable.run("go", deps="ada")
    assert str(run.output).endswith("] Ada likes tea")  # the run read its own staged write
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async(run.id)]
    assert steps == ["memory.model"] * 3
    assert [i.text for i in await store.search(NS, "tea")] == ["Ada likes tea"]
    await store.aclose()
