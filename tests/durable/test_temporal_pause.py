"""``TemporalAgent`` runs that pause (SPEC 17): they wait in their workflow for a signal.

In process: a paused run tells its pending calls through a query (``pending``); ``decide``
checks a decision set as ``continue_run`` does (``InvalidInput``, nothing sent) and signals it;
the run goes on and ``run``/``result`` return it, paused time included. With worker processes:
a worker SIGKILLed while its run is paused loses nothing (another worker replays the workflow to
the same pause; decided, the approved call ran once); a worker SIGKILLed inside the approved
call (its side effect done) does not run it again: the call has one attempt, and when it times
out (its heartbeat stopped) the model reads ``LOST_TEXT``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="TemporalAgent tests need the temporal extra")

from temporalio.client import Client

from agentloop import Agent, Answer, Approve, Deny
from agentloop.durable.temporal import TemporalAgent
from agentloop.errors import InvalidInput
from agentloop.model import ModelRequest
from agentloop.pausing import LOST_TEXT, PendingCall
from agentloop.testing import FunctionModel, call

HERE = Path(__file__).parent
CHILD = HERE / "_temporal_child.py"
sys.path.insert(0, str(HERE))

import _temporal_child  # noqa: E402
from _pause_plan import ask_customer, plan, refund, refunds  # noqa: E402


async def _paused(
    durable: TemporalAgent[Any], client: Client, workflow_id: str
) -> tuple[PendingCall, ...]:
    deadline = time.monotonic() + 120
    while not (pending := await durable.pending(workflow_id, client=client)):
        assert time.monotonic() < deadline, "the run never paused"
        await asyncio.sleep(0.1)
    return pending


async def test_a_paused_run_waits_for_a_signal(client: Client) -> None:
    refunds.clear()
    agent = Agent(FunctionModel(plan), tools=[refund, ask_customer])
    durable = TemporalAgent(agent, name="t-approvals")
    async with durable.worker(client):
        started = await durable.start("refund A1", client=client, workflow_id="t-pause")
        pending = await _paused(durable, client, "t-pause")
        assert [(p.id, p.kind, p.call.name) for p in pending] == [
            ("c1", "approval", "refund"),
            ("c2", "external", "ask_customer"),
        ]
        for bad, words in [
            ({"c1": Approve()}, "no decision for pending call 'c2'"),
            ({"c1": Approve(), "c2": Approve()}, "does not fit an external call"),
            ({"c1": Approve(), "c2": Answer("x"), "c3": Deny()}, "not a pending call"),
        ]:
            with pytest.raises(InvalidInput, match=words):
                await durable.decide("t-pause", bad, client=client)  # type: ignore[arg-type]
        deployed_without = TemporalAgent(Agent(FunctionModel(plan), tools=[ask_customer]), name="x")
        with pytest.raises(InvalidInput, match="would run tool 'refund'"):  # nothing is sent
            await deployed_without.decide("t-pause", {"c1": Approve(), "c2": Deny()}, client=client)
        assert refunds == []
        await durable.decide("t-pause", {"c1": Approve(), "c2": Answer("broken")}, client=client)
        run = await asyncio.wait_for(started.result(), 120)
        assert run.output == "refund: refunded A1; ask_customer: broken"
        assert run.id == "t-pause" and not run.paused and refunds == ["A1"]
        assert await durable.pending("t-pause", client=client) == ()
        with pytest.raises(InvalidInput, match="not paused"):
            await durable.decide("t-pause", {"c1": Approve(), "c2": Answer("x")}, client=client)


async def test_two_decision_sets_for_one_pause_apply_one(client: Client) -> None:
    refunds.clear()
    agent = Agent(FunctionModel(plan), tools=[refund, ask_customer])
    durable = TemporalAgent(agent, name="t-twice")
    async with durable.worker(client):
        started = await durable.start("refund A1", client=client, workflow_id="t-twice")
        await _paused(durable, client, "t-twice")
        first = {"c1": Approve(), "c2": Answer("first")}
        second = {"c1": Deny(), "c2": Answer("second")}
        sent = await asyncio.gather(
            durable.decide("t-twice", first, client=client),  # type: ignore[arg-type]
            durable.decide("t-twice", second, client=client),  # type: ignore[arg-type]
            return_exceptions=True,
        )
        run = await asyncio.wait_for(started.result(), 120)
    assert all(r is None or isinstance(r, InvalidInput) for r in sent), sent
    assert run.output in (
        "refund: refunded A1; ask_customer: first",
        "refund: User denied permission; ask_customer: second",
    )
    assert refunds == (["A1"] if "first" in str(run.output) else [])


def _child_plan(request: ModelRequest) -> Any:
    done = any(m.role == "tool" for m in request.messages)
    return "child done" if done else [call("refund", {"order": "A1"})]


def _parent_plan(request: ModelRequest) -> Any:
    results = [p for m in request.messages if m.role == "tool" for p in m.tool_results_parts]
    return f"parent read: {results[0].content}" if results else [call("helper", {"input": "go"})]


async def test_a_child_agent_that_pauses_is_a_soft_error(client: Client) -> None:
    """The child runs in the tool activity, where no parent run can wait for it."""
    refunds.clear()
    child = Agent(FunctionModel(_child_plan), tools=[refund])
    helper = child.as_tool(name="helper", description="Does refunds.")
    durable = TemporalAgent(Agent(FunctionModel(_parent_plan), tools=[helper]), name="t-nested")
    async with durable.worker(client):
        run = await durable.run("go", client=client)
    assert not run.paused and refunds == []
    assert run.output == "parent read: agent 'helper' paused, and no parent run can wait for it"


def _worker(server: str, tmp: Path, name: str, **env: str) -> subprocess.Popen[str]:
    ready = tmp / f"ready-{name}"
    environ = {k: v for k, v in os.environ.items() if k not in ("KILL", "HEARTBEAT")}
    environ.update(
        EFFECTS=str(tmp / "effects"),
        STOP=str(tmp / "stop"),
        READY=str(ready),
        AGENT="approvals",
        **env,
    )
    worker = subprocess.Popen(
        [sys.executable, str(CHILD), server],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, f"worker {name} did not start"
        time.sleep(0.05)
    return worker


def _effects(tmp: Path) -> list[str]:
    return sorted(line for line in (tmp / "effects").read_text().split("\n") if line)


async def test_a_worker_killed_while_paused_loses_nothing(
    server: str, client: Client, tmp_path: Path
) -> None:
    durable = _temporal_child.build_approvals()
    first = _worker(server, tmp_path, "first")
    await durable.start("refund A1", client=client, workflow_id="t-kill-paused")
    [waiting] = await _paused(durable, client, "t-kill-paused")
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=120)
    second = _worker(server, tmp_path, "second")
    try:
        assert await durable.pending("t-kill-paused", client=client) == (waiting,)
        await durable.decide("t-kill-paused", {waiting.id: Approve()}, client=client)
        run = await asyncio.wait_for(durable.get_run("t-kill-paused", client=client).result(), 120)
    finally:
        (tmp_path / "stop").touch()
        second.communicate(timeout=120)
    assert run.output == "done: refunded A1"
    assert _effects(tmp_path) == ["done a", "refund A1", "start a"]


async def test_a_worker_killed_inside_the_approved_call_does_not_run_it_again(
    server: str, client: Client, tmp_path: Path
) -> None:
    durable = _temporal_child.build_approvals()
    first = _worker(server, tmp_path, "first", KILL="refund", HEARTBEAT="2")
    await durable.start("refund A1", client=client, workflow_id="t-kill-approved")
    [waiting] = await _paused(durable, client, "t-kill-approved")
    await durable.decide("t-kill-approved", {waiting.id: Approve()}, client=client)
    first.communicate(timeout=120)
    assert first.returncode == -9  # the refund was done; its result never returned
    second = _worker(server, tmp_path, "second", HEARTBEAT="2")
    try:
        found = durable.get_run("t-kill-approved", client=client)
        run = await asyncio.wait_for(found.result(), 120)
    finally:
        (tmp_path / "stop").touch()
        second.communicate(timeout=120)
    assert run.output == f"done: {LOST_TEXT}"
    assert _effects(tmp_path) == ["done a", "refund A1", "start a"]
