"""A child agent's pending call pauses its parent; child runs are recorded (SPEC 17, 18)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Approve, Deny, tool
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def child_agent(ran: list[Any], steps: list[Any]) -> Agent[Any]:
    @tool(requires_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        ran.append(amount)
        return f"wired {amount}"

    return Agent(ScriptedModel(steps), tools=[wire])


def parent_agent(child: Agent[Any], steps: list[Any], **kwargs: Any) -> tuple[Agent[Any], Any]:
    model = ScriptedModel(steps)
    banker = child.as_tool(name="banker", description="Moves money.")
    return Agent(model, tools=[banker], **kwargs), model


async def test_a_childs_pending_call_pauses_the_parent_and_the_decision_continues_it() -> None:
    ran: list[Any] = []
    child = child_agent(ran, [call("wire", {"amount": 5}, id="w1"), reply("child done")])
    parent, model = parent_agent(child, [call("banker", {"input": "pay"}, id="p1"), reply("ok")])
    run = await parent.run("pay the bill")
    assert run.paused
    assert [(p.id, p.kind, p.path) for p in run.pending] == [("w1", "approval", ("banker",))]
    finished = await parent.continue_run(decisions={"w1": Approve()})
    assert finished.output == "ok" and ran == [5]
    result = model.requests[1].messages[-1].tool_results_parts[0]
    assert (result.call_id, result.content, result.is_error) == ("p1", "child done", False)


async def test_a_denied_child_call_never_runs() -> None:
    ran: list[Any] = []
    child = child_agent(ran, [call("wire", {"amount": 5}, id="w1"), reply("refused")])
    parent, _ = parent_agent(child, [call("banker", {"input": "pay"}, id="p1"), reply("ok")])
    await parent.run("pay")
    await parent.continue_run(decisions={"w1": Deny("no")})
    assert ran == []


async def test_child_runs_are_recorded_with_a_link_and_continue_in_another_process(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    ran: list[Any] = []
    child = child_agent(ran, [call("wire", {"amount": 7}, id="w1")])
    parent, _ = parent_agent(
        child, [call("banker", {"input": "pay"}, id="p1")], store=store, session_id="top"
    )
    run = await parent.run("pay")
    assert run.paused
    children = [s for s in store.load_runs() if s.session_id != "top"]
    assert len(children) == 1 and children[0].run.paused
    assert children[0].run.parent == {
        "session_id": "top",
        "run_id": run.id,
        "call_id": "p1",
        "tool": "banker",
    }

    # another process: new agents on the same store, the child's model scripted from here on
    ran2: list[Any] = []
    child2 = child_agent(ran2, [reply("child done")])
    banker = child2.as_tool(name="banker", description="Moves money.")
    model2 = ScriptedModel([reply("ok")])
    resumed = Agent.resume("top", store=store, client=model2, tools=[banker])
    finished = await resumed.continue_run(decisions={"w1": Approve()})
    assert finished.output == "ok" and ran == [] and ran2 == [7]
    child_record = store.load_run(children[0].run.id)
    assert child_record is not None and child_record.run.output == "child done"
