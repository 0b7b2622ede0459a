"""A ``DBOSAgent`` run paused on a toolset's tool (SPEC 22 x SPEC 17 x SPEC 25).

The agent's tools come from ``Agent(toolsets=...)``: the run pauses on the toolset's approval
tool and its external tool; ``DBOSAgent.decide`` with a decider whose toolsets lack the approved
tool is ``InvalidInput`` naming it, nothing recorded (before, an agent with toolsets was never
checked, and the worker's continuation read ``Tool not found``); with the right toolsets the
approved call runs once, as a step of the continuation.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")


from agentloop import Agent, Answer, Approve
from agentloop.durable._dbos_pause import DECIDERS
from agentloop.durable.dbos import DBOSAgent
from agentloop.errors import InvalidInput
from agentloop.pausing import Decision
from agentloop.testing import FunctionModel
from agentloop.toolsets import FunctionToolset

sys.path.insert(0, str(Path(__file__).parent))

from _pause_plan import ask_customer, dbos_launched, dbos_paused, plan, refund, refunds


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[DBOSAgent[str | None]]:
    refunds.clear()
    shop = FunctionToolset([refund, ask_customer], name="shop")
    agent = DBOSAgent(Agent(FunctionModel(plan), toolsets=[shop]), name="toolset_approvals")
    with dbos_launched(tmp_path / "dbos.sqlite"):
        yield agent


async def test_a_toolset_tool_is_decided_and_run_once(durable: DBOSAgent[str | None]) -> None:
    started = await durable.start("refund A1", workflow_id="wf-shop")
    pending = await dbos_paused("wf-shop")
    assert [p.call.name for p in pending] == ["refund", "ask_customer"]
    decisions: dict[str, Decision] = {"c1": Approve(), "c2": Answer("it arrived broken")}
    workflow, agent = DECIDERS["toolset_approvals"]
    elsewhere = Agent(FunctionModel(plan), toolsets=[FunctionToolset([ask_customer], name="shop")])
    DECIDERS["toolset_approvals"] = (workflow, elsewhere)  # a decider built without refund
    try:
        with pytest.raises(InvalidInput, match="would run tool 'refund'"):
            DBOSAgent.decide("wf-shop", decisions)
    finally:
        DECIDERS["toolset_approvals"] = (workflow, agent)
    assert len(DBOSAgent.pending("wf-shop")) == 2 and refunds == []  # still paused
    await asyncio.to_thread(durable.decide, "wf-shop", decisions)
    run = await asyncio.wait_for(started.result(poll_seconds=0.05), 60)
    assert run.output == "refund: refunded A1; ask_customer: it arrived broken"
    assert refunds == ["A1"]
