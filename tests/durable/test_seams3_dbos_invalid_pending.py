"""A ``DBOSAgent`` run never publishes a pending call whose arguments do not validate (SPEC 17).

The engine's gates run inside the workflow: a call that does not validate is answered with the
soft ``Invalid arguments for tool ...`` text at once, so ``DBOSAgent.pending`` lists only the
model's fixed call and ``decide`` spends the approval on a call that runs. DBOS on a real
SQLite system database, in process.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")

from agentloop import Agent, Approve
from agentloop.durable.dbos import DBOSAgent
from agentloop.testing import FunctionModel

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from _pause_plan import dbos_launched, dbos_paused, fixing, refund, refunds  # noqa: E402


async def test_only_the_call_that_validates_is_published_and_decided(tmp_path: Path) -> None:
    refunds.clear()
    durable = DBOSAgent(Agent(FunctionModel(fixing), tools=[refund]), name="fixing")
    with dbos_launched(tmp_path / "dbos.sqlite"):
        started = await durable.start("refund A1", workflow_id="wf-fix")
        pending = await dbos_paused("wf-fix")
        assert [(p.id, dict(p.call.arguments)) for p in pending] == [("c2", {"order": "A1"})]
        durable.decide("wf-fix", {"c2": Approve()})
        run = await asyncio.wait_for(started.result(poll_seconds=0.05), 60)
    assert refunds == ["A1"]
    invalid, done = str(run.output).split(" | ")
    assert invalid.startswith("Invalid arguments for tool 'refund': order: ")
    assert done == "refunded A1"
