"""A ``TemporalAgent`` run never waits on a pending call whose arguments do not validate (SPEC 17).

The engine's gates run in the workflow: a call that does not validate is answered with the soft
``Invalid arguments for tool ...`` text at once, so ``pending`` lists only the model's fixed
call and ``decide`` spends the approval on a call that runs. A real Temporal dev server.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="TemporalAgent tests need the temporal extra")

from temporalio.client import Client

from agentloop import Agent, Approve
from agentloop.durable.temporal import TemporalAgent
from agentloop.testing import FunctionModel

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from _pause_plan import fixing, refund, refunds  # noqa: E402


async def test_only_the_call_that_validates_waits_and_is_decided(client: Client) -> None:
    refunds.clear()
    durable = TemporalAgent(Agent(FunctionModel(fixing), tools=[refund]), name="t-fixing")
    async with durable.worker(client):
        started = await durable.start("refund A1", client=client, workflow_id="t-fix")
        deadline = time.monotonic() + 120
        while not (pending := await durable.pending("t-fix", client=client)):
            assert time.monotonic() < deadline, "the run never paused"
            await asyncio.sleep(0.1)
        assert [(p.id, dict(p.call.arguments)) for p in pending] == [("c2", {"order": "A1"})]
        await durable.decide("t-fix", {"c2": Approve()}, client=client)
        run = await asyncio.wait_for(started.result(), 120)
    assert refunds == ["A1"]
    invalid, done = str(run.output).split(" | ")
    assert invalid.startswith("Invalid arguments for tool 'refund': order: ")
    assert done == "refunded A1"
