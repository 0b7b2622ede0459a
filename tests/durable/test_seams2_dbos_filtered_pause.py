"""A ``DBOSAgent`` run paused on a tool a filter stops offering (SPEC 17 x SPEC 22 x SPEC 25).

The agent's toolset offers ``refund`` through a filter that reads the run's deps and the app's
live settings (a feature switched off between the pause and the decision). ``DBOSAgent.decide``
then approves a call the continuation would not offer: it is ``InvalidInput`` naming the tool,
nothing recorded, the run still paused (before, the decision was accepted, the continuation's
workflow failed with ``InvalidInput`` saying the run "stays paused", and the run was neither
paused nor ended: ``pending`` was empty, another decision was refused as "not paused").
Switched back on, the same decision runs the call once.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")


from agentloop import Agent, Answer, Approve, RunContext
from agentloop.durable.dbos import DBOSAgent
from agentloop.errors import InvalidInput
from agentloop.model import ToolSpec
from agentloop.pausing import Decision
from agentloop.testing import FunctionModel
from agentloop.toolsets import FunctionToolset

sys.path.insert(0, str(Path(__file__).parent))

from _pause_plan import ask_customer, dbos_launched, dbos_paused, plan, refund, refunds

ENABLED: set[str] = set()
"""The app's live settings: the tiers refunds are switched on for."""


def offered(ctx: RunContext[Any], spec: ToolSpec) -> bool:
    return spec.name != "refund" or ctx.deps["tier"] in ENABLED


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[DBOSAgent[str | None]]:
    refunds.clear()
    ENABLED.clear()
    shop = FunctionToolset([refund, ask_customer], name="shop").filtered(offered)
    agent = DBOSAgent(Agent(FunctionModel(plan), toolsets=[shop]), name="seams2_filtered")
    with dbos_launched(tmp_path / "dbos.sqlite"):
        yield agent


async def test_a_decision_the_continuation_would_not_offer_is_refused(
    durable: DBOSAgent[str | None],
) -> None:
    ENABLED.add("gold")
    started = await durable.start("refund A1", deps={"tier": "gold"}, workflow_id="wf-filtered")
    pending = await dbos_paused("wf-filtered")
    assert [p.call.name for p in pending] == ["refund", "ask_customer"]
    ENABLED.clear()  # refunds switched off while the run waited
    decisions: dict[str, Decision] = {"c1": Approve(), "c2": Answer("it arrived broken")}
    with pytest.raises(InvalidInput, match="would run tool 'refund'"):
        await asyncio.to_thread(durable.decide, "wf-filtered", decisions)
    assert len(DBOSAgent.pending("wf-filtered")) == 2 and refunds == []  # still paused
    ENABLED.add("gold")  # switched on again: the run's own deps decide it
    await asyncio.to_thread(durable.decide, "wf-filtered", decisions)
    run = await asyncio.wait_for(started.result(poll_seconds=0.05), 60)
    assert run.output == "refund: refunded A1; ask_customer: it arrived broken"
    assert refunds == ["A1"]
