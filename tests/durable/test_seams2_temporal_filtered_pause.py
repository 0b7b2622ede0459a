"""A ``TemporalAgent`` run paused on a tool a filter stops offering (SPEC 17 x 22 x 25).

As the DBOS twin of this test: the toolset offers ``refund`` through a filter that reads the
run's deps and the app's live settings. ``TemporalAgent.decide`` approving the call while the
filter would not offer it is ``InvalidInput`` naming the tool, nothing sent, the run still
paused (before, the signal was sent, the workflow failed with ``InvalidInput`` saying the run
"stays paused", and nobody who decided was told). Switched back on, the call runs once.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="TemporalAgent tests need the temporal extra")

from temporalio.client import Client

from agentloop import Agent, Answer, Approve, RunContext
from agentloop.durable.temporal import TemporalAgent
from agentloop.errors import InvalidInput
from agentloop.model import ToolSpec
from agentloop.pausing import Decision
from agentloop.testing import FunctionModel
from agentloop.toolsets import FunctionToolset

sys.path.insert(0, str(Path(__file__).parent))

from _pause_plan import ask_customer, plan, refund, refunds

ENABLED: set[str] = set()
"""The app's live settings: the tiers refunds are switched on for."""


def offered(ctx: RunContext[Any], spec: ToolSpec) -> bool:
    return spec.name != "refund" or ctx.deps["tier"] in ENABLED


async def test_a_decision_the_continuation_would_not_offer_is_refused(client: Client) -> None:
    refunds.clear()
    ENABLED.clear()
    ENABLED.add("gold")
    shop = FunctionToolset([refund, ask_customer], name="shop").filtered(offered)
    durable = TemporalAgent(Agent(FunctionModel(plan), toolsets=[shop]), name="seams2-filtered")
    async with durable.worker(client):
        started = await durable.start(
            "refund A1", client=client, deps={"tier": "gold"}, workflow_id="seams2-filtered"
        )
        deadline = time.monotonic() + 120
        while not await durable.pending("seams2-filtered", client=client):
            assert time.monotonic() < deadline, "the run never paused"
            await asyncio.sleep(0.1)
        ENABLED.clear()  # refunds switched off while the run waited
        decisions: dict[str, Decision] = {"c1": Approve(), "c2": Answer("it arrived broken")}
        with pytest.raises(InvalidInput, match="would run tool 'refund'"):
            await durable.decide("seams2-filtered", decisions, client=client)
        assert len(await durable.pending("seams2-filtered", client=client)) == 2
        ENABLED.add("gold")  # switched on again: the run's own deps decide it
        await durable.decide("seams2-filtered", decisions, client=client)
        run = await asyncio.wait_for(started.result(), 120)
    assert run.output == "refund: refunded A1; ask_customer: it arrived broken"
    assert refunds == ["A1"]
