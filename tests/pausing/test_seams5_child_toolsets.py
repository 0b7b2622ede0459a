"""A child agent's approval is never spent on nothing when its toolsets decide (17 x 13 x 22).

A parent runs a child agent as a tool (``as_tool``); the child's tool comes from a toolset that
decides with the deps (an admin-only ``DynamicToolset``), and its call pauses the parent. The
parent continued without those deps (a face or a worker that forgot ``deps=``): before, the
approval was accepted and recorded, the child read ``Tool not found: wipe. Available: none
registered`` and the run completed: the approved action was lost. The top agent's calls were
already judged with the continuation's deps; now a child's are too: ``InvalidInput`` naming
the tool, the child and the deps, nothing recorded, the run still paused, and the same decision
with the deps runs the call once, in this process or another on the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Approve, Edit, RunContext, tool
from agentloop.errors import InvalidInput
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import DynamicToolset

pytestmark = pytest.mark.usefixtures("no_real_sleep")

WIPED: list[str] = []
ADMIN = {"admin": True}


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Wipe a path."""
    WIPED.append(path)
    return f"wiped {path}"


def admin_only(ctx: RunContext[Any]) -> list[Any]:
    return [wipe] if (ctx.deps or {}).get("admin") else []


def parent(store: SQLiteStore, *parent_steps: Any, resume: bool = False) -> Agent[Any]:
    child_steps: list[Any] = [reply("child done")]  # a continuing process: the child answers
    if not resume:
        child_steps.insert(0, call("wipe", {"path": "/tmp/a"}, id="w1"))
    child = Agent(ScriptedModel(child_steps), toolsets=[DynamicToolset(admin_only)], name="ops")
    ops = child.as_tool(name="ops", description="Operations.")
    model = ScriptedModel(list(parent_steps) or [call("ops", {"input": "wipe"}), reply("done")])
    if resume:  # another process: the same code, the session from the store
        return Agent.resume("s1", store=store, client=model, tools=[ops])
    return Agent(model, tools=[ops], store=store, session_id="s1")


def still_paused(store: SQLiteStore, run_id: str) -> None:
    stored = store.load_run(run_id)
    assert stored is not None and stored.run.paused and stored.run.decisions == []


@pytest.mark.parametrize("decision", [Approve(), Edit({"path": "/tmp/b"})])
async def test_a_child_approval_its_toolset_no_longer_offers_is_refused(
    tmp_path: Path, decision: Any
) -> None:
    WIPED.clear()
    store = SQLiteStore(tmp_path / "runs.db")
    agent = parent(store)
    run = await agent.run("go", deps=ADMIN)
    assert run.paused and [(p.call.name, p.path) for p in run.pending] == [("wipe", ("ops",))]

    with pytest.raises(InvalidInput, match=r"tool 'wipe', which agent 'ops' .*deps=None"):
        await agent.continue_run(decisions={"w1": decision})
    still_paused(store, run.id)
    assert WIPED == []

    done = await agent.continue_run(decisions={"w1": decision}, deps=ADMIN)
    assert done.id == run.id and done.output == "done"
    assert WIPED == ["/tmp/a" if isinstance(decision, Approve) else "/tmp/b"]


async def test_another_process_without_the_deps_is_refused_and_one_with_them_runs_it(
    tmp_path: Path,
) -> None:
    WIPED.clear()
    store = SQLiteStore(tmp_path / "runs.db")
    run = await parent(store).run("go", deps=ADMIN)
    assert run.paused

    worker = parent(store, reply("done"), resume=True)
    with pytest.raises(InvalidInput, match=r"tool 'wipe', which agent 'ops'"):
        await worker.continue_run(decisions={"w1": Approve()})
    still_paused(store, run.id)

    done = await parent(store, reply("done"), resume=True).continue_run(
        decisions={"w1": Approve()}, deps=lambda run: ADMIN
    )
    assert done.id == run.id and done.output == "done" and WIPED == ["/tmp/a"]
