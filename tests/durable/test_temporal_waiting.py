"""What a waiting ``TemporalAgent`` workflow holds (SPEC 25): its history, and no worker slot.

A worker allowed two workflow tasks and one activity at a time, and one cached workflow, still
pauses run after run: a paused run is a workflow waiting on a signal, not a task in progress
and not an activity (each new run's model call takes the one activity slot while the earlier
runs wait), and the cache evicts it. Decided later, each is replayed from its history on that
same worker (its observers see its start again: the engine retraced it) and finishes.
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

from agentloop import Agent, Answer, Approve
from agentloop.durable.temporal import TemporalAgent
from agentloop.events import Event, RunStarted
from agentloop.observers import Observer
from agentloop.pausing import Decision
from agentloop.testing import FunctionModel

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from _pause_plan import ask_customer, plan, refund, refunds  # noqa: E402

RUNS = 4


async def _wait_paused(durable: TemporalAgent[Any], client: Client, workflow_id: str) -> None:
    deadline = time.monotonic() + 120
    while not await durable.pending(workflow_id, client=client):
        assert time.monotonic() < deadline, f"{workflow_id} never paused"
        await asyncio.sleep(0.1)


class _Starts(Observer):
    """How many times each run's workflow code started (1 + its replays)."""

    def __init__(self) -> None:
        self.starts: dict[str, int] = {}

    def on_event(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.starts[event.run.id] = self.starts.get(event.run.id, 0) + 1


async def test_paused_workflows_hold_no_slot_and_are_evicted(client: Client) -> None:
    refunds.clear()
    starts = _Starts()
    agent = Agent(FunctionModel(plan), tools=[refund, ask_customer], observers=[starts])
    durable = TemporalAgent(agent, name="t-hold")
    limits = {"max_concurrent_workflow_tasks": 2, "max_concurrent_activities": 1}
    async with durable.worker(client, max_cached_workflows=1, **limits):
        started = []
        for n in range(RUNS):  # each pauses while the earlier ones wait: none holds the worker
            workflow_id = f"t-hold-{n}"
            started.append(await durable.start("refund A1", client=client, workflow_id=workflow_id))
            await _wait_paused(durable, client, workflow_id)
        for n in range(RUNS):  # evicted from the one-workflow cache, replayed from history
            decisions: dict[str, Decision] = {"c1": Approve(), "c2": Answer(f"reason {n}")}
            await durable.decide(f"t-hold-{n}", decisions, client=client)
        runs = await asyncio.wait_for(asyncio.gather(*(s.result() for s in started)), 180)
    assert [run.output for run in runs] == [
        f"refund: refunded A1; ask_customer: reason {n}" for n in range(RUNS)
    ]
    assert refunds == ["A1"] * RUNS
    replayed = [n for n in range(RUNS) if starts.starts[f"t-hold-{n}"] > 1]
    assert len(replayed) >= RUNS - 1, starts.starts  # evicted from the one-entry cache, replayed
