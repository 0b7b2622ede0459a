"""Durable runs that hand off (SPEC 14, 17, 26): a receiver's calls are steps and activities.

On DBOS (SQLite) and a Temporal dev server, the receiver's tool in its ``tools=`` or its
``toolsets=``: the receiver's model calls are the run's model steps/activities and its tools the
tool steps/activities (a replay never calls them again), the transfer runs in the workflow (a
replay hands off again; the model never sees a second transfer), and a pause in the receiver is
decided against the receiver's tools: the starting agent lacks the tool, and the approval used
to be refused; approved, the call runs once.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop import Approve

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from _handoff_plan import agents, refunds, seen  # noqa: E402


@pytest.fixture(params=[False, True], ids=["tools", "toolsets"])
def dbos_db(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")
    from dbos import DBOS

    from agentloop.durable.dbos import DBOSAgent

    durable = DBOSAgent(agents(request.param), name="front")
    DBOS(
        config={
            "name": "agentloop-tests",
            "system_database_url": f"sqlite:///{tmp_path / 'dbos.sqlite'}",
            "log_level": "ERROR",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()
    yield durable
    DBOS.destroy(destroy_registry=True)


async def test_a_dbos_run_paused_in_a_receiver_is_decided_by_the_receiver(dbos_db: Any) -> None:
    from dbos import DBOS

    durable = dbos_db
    running = asyncio.ensure_future(durable.run("refund A1", workflow_id="wf-handoff"))
    deadline = time.monotonic() + 60
    while not (pending := durable.pending("wf-handoff")):
        assert time.monotonic() < deadline and not running.done(), "the run never paused"
        await asyncio.sleep(0.05)
    assert [p.call.name for p in pending] == ["refund"]
    await asyncio.to_thread(durable.decide, "wf-handoff", {"c1": Approve()})
    run = await asyncio.wait_for(running, 60)
    assert run.output == "billing: refunded A1" and run.last_agent == "billing"
    assert refunds == ["A1"] and seen == {"front": 1, "billing": 2}  # the fork replayed both
    steps = await DBOS.list_workflow_steps_async("wf-handoff/continued/1")
    names = [s["function_name"] for s in steps]
    assert names.count("front.model") == 3 and names.count("front.tool.refund") == 1


@pytest.mark.parametrize("toolset", [False, True])
async def test_a_temporal_run_paused_in_a_receiver_is_decided_by_the_receiver(
    client: Any, toolset: bool
) -> None:
    pytest.importorskip("temporalio", reason="TemporalAgent tests need the temporal extra")
    from agentloop.durable.temporal import TemporalAgent

    name = f"t-handoff-{toolset}"
    durable = TemporalAgent(agents(toolset), name=name)
    async with durable.worker(client):
        started = await durable.start("refund A1", client=client, workflow_id=name)
        deadline = time.monotonic() + 120
        while not (pending := await durable.pending(name, client=client)):
            assert time.monotonic() < deadline, "the run never paused"
            await asyncio.sleep(0.1)
        assert [p.call.name for p in pending] == ["refund"]
        await durable.decide(name, {"c1": Approve()}, client=client)
        run = await asyncio.wait_for(started.result(), 120)
    assert run.output == "billing: refunded A1" and run.last_agent == "billing"
    assert refunds == ["A1"] and seen == {"front": 1, "billing": 2}  # each model call once
    events = [e async for e in started.handle.fetch_history_events()]
    kinds = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert kinds.count(f"agentloop.{name}.model") == 3
    assert kinds.count(f"agentloop.{name}.tool") == 1  # the refund; the transfer is inline
