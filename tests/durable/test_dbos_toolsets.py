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
