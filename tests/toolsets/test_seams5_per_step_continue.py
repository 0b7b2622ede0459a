"""After a continued paused turn, a per-step toolset offers the next step's tools (17 x 22).

A ``DynamicToolset(fn, per_step=True)`` decides each model call's tools with ``ctx.turn``. A
continuation computes the paused turn's offer first (the decided calls are judged against it);
before, the next model call reused that offer, so the step after an approval was offered the
paused step's tools, and the model's call to the tool its step should have read ``tool 'x' is
not available``. Now the next call's offer is computed for its own turn, as in a run that never
paused, in this process or another on the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Approve, RunContext, tool
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import DynamicToolset

pytestmark = pytest.mark.usefixtures("no_real_sleep")


@tool(requires_approval=True)
def plan(goal: str) -> str:
    """Write the plan (first step only)."""
    return f"plan for {goal}"


@tool
def execute(step: str) -> str:
    """Carry out a step (later steps only)."""
    return f"did {step}"


def by_step(ctx: RunContext[Any]) -> list[Any]:
    return [plan] if ctx.turn == 0 else [execute]


def offered(model: ScriptedModel) -> list[list[str]]:
    return [[spec.name for spec in request.tools] for request in model.requests]


@pytest.mark.parametrize("where", ["same process", "another process"])
async def test_the_step_after_an_approval_offers_its_own_tools(tmp_path: Path, where: str) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    tools = [DynamicToolset(by_step, per_step=True)]
    rest = [call("execute", {"step": "one"}), reply("done")]
    first = ScriptedModel([call("plan", {"goal": "g"}, id="c1"), *rest])
    agent = Agent(first, toolsets=tools, store=store, session_id="s1")
    run = await agent.run("go")
    assert run.paused
    model = first
    if where == "another process":
        model = ScriptedModel(rest)
        agent = Agent.resume("s1", store=store, client=model, toolsets=tools)

    done = await agent.continue_run(decisions={"c1": Approve()})
    results = [(r.name, r.content) for m in done.messages for r in m.tool_results_parts]
    assert results == [("plan", "plan for g"), ("execute", "did one")]
    assert offered(model)[-2:] == [["execute"], ["execute"]]
