"""``DBOSAgent`` runs that pause (SPEC 17): they wait inside their workflow for decisions.

In process (SQLite): a run with a call needing approval publishes its pending calls
(``DBOSAgent.pending``) and waits on ``DBOS.recv``; ``DBOSAgent.decide`` checks a decision set as
``continue_run`` does (``InvalidInput``, nothing sent) and sends it; the run then ends and
``durable.run`` returns it, paused time included. Approve runs the call once, Deny and Answer
answer it without running anything. In child processes, on SQLite and on PostgreSQL: a worker
SIGKILLed while its run is paused loses nothing (restarted, then decided: the approved call ran
exactly once); a worker SIGKILLed inside the approved call (its side effect done, its result
never returned) does not run it again on recovery: the model reads ``LOST_TEXT``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")

from dbos import DBOS

from agentloop import Agent, Answer, Approve, Deny, Edit
from agentloop.durable.dbos import PAUSED_CHILD_TEXT, DBOSAgent
from agentloop.errors import InvalidInput
from agentloop.model import ModelRequest
from agentloop.pausing import LOST_TEXT, PendingCall
from agentloop.testing import FunctionModel, call

HERE = Path(__file__).parent
CHILD = HERE / "_dbos_pause_child.py"

sys.path.insert(0, str(HERE))

from _pause_plan import ask_customer, plan, refund, refunds  # noqa: E402


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[DBOSAgent[str | None]]:
    refunds.clear()
    agent = DBOSAgent(Agent(FunctionModel(plan), tools=[refund, ask_customer]), name="approvals")
    DBOS(
        config={
            "name": "agentloop-tests",
            "system_database_url": f"sqlite:///{tmp_path / 'dbos.sqlite'}",
            "log_level": "ERROR",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()
    yield agent
    DBOS.destroy(destroy_registry=True)


async def _paused(workflow_id: str) -> tuple[PendingCall, ...]:
    deadline = time.monotonic() + 60
    while not (pending := DBOSAgent.pending(workflow_id)):
        assert time.monotonic() < deadline, "the run never paused"
        await asyncio.sleep(0.05)
    return pending


async def test_a_paused_run_waits_in_its_workflow_and_decide_continues_it(
    durable: DBOSAgent[str | None],
) -> None:
    running = asyncio.ensure_future(durable.run("refund A1", workflow_id="wf-pause"))
    pending = await _paused("wf-pause")
    assert [(p.id, p.kind, p.call.name) for p in pending] == [
        ("c1", "approval", "refund"),
        ("c2", "external", "ask_customer"),
    ]
    assert not running.done() and refunds == []
    durable.decide("wf-pause", {"c1": Approve(), "c2": Answer("it arrived broken")})
    run = await asyncio.wait_for(running, 60)
    assert run.output == "refund: refunded A1; ask_customer: it arrived broken"
    assert run.id == "wf-pause" and not run.paused and refunds == ["A1"]
    assert DBOSAgent.pending("wf-pause") == ()
    with pytest.raises(InvalidInput, match="not paused"):  # a repeat is refused
        DBOSAgent.decide("wf-pause", {"c1": Approve(), "c2": Answer("again")})
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async("wf-pause")]
    assert steps.count("approvals.tool.refund") == 1


async def test_deny_and_edit(durable: DBOSAgent[str | None]) -> None:
    denied = await durable.start("refund A1", workflow_id="wf-deny")
    await _paused("wf-deny")
    durable.decide("wf-deny", {"c1": Deny("over the limit"), "c2": Deny()})
    run = await asyncio.wait_for(denied.result(poll_seconds=0.05), 60)
    assert run.output == (
        "refund: User denied permission: over the limit; ask_customer: User denied permission"
    )
    assert refunds == []
    edited = await durable.start("refund A1", workflow_id="wf-edit")
    await _paused("wf-edit")
    durable.decide("wf-edit", {"c1": Edit({"order": "A2"}), "c2": Answer("ok")})
    run = await asyncio.wait_for(edited.result(poll_seconds=0.05), 60)
    assert run.output == "refund: refunded A2; ask_customer: ok" and refunds == ["A2"]


async def test_bad_decisions_are_invalid_input_and_nothing_is_sent(
    durable: DBOSAgent[str | None],
) -> None:
    started = await durable.start("refund A1", workflow_id="wf-bad")
    await _paused("wf-bad")
    bad: list[tuple[object, str]] = [
        ({"c1": Approve(), "c2": Answer("x"), "c9": Approve()}, "not a pending call"),
        ({"c1": Approve()}, "no decision for pending call 'c2'"),
        ({"c1": Answer("yes"), "c2": Answer("x")}, "does not fit an approval call"),
        ({"c1": Approve(), "c2": Approve()}, "does not fit an external call"),
        ({"c1": "yes", "c2": Answer("x")}, "not a decision"),
        (["c1"], "must be a dict"),
    ]
    for decisions, words in bad:
        with pytest.raises(InvalidInput, match=words):
            DBOSAgent.decide("wf-bad", decisions)  # type: ignore[arg-type]
    assert len(DBOSAgent.pending("wf-bad")) == 2  # still paused on both
    with pytest.raises(InvalidInput, match="not paused"):
        DBOSAgent.decide("wf-nobody", {"c1": Approve()})
    durable.decide("wf-bad", {"c1": Approve(), "c2": Answer("x")})
    run = await asyncio.wait_for(started.result(poll_seconds=0.05), 60)
    assert run.output == "refund: refunded A1; ask_customer: x" and refunds == ["A1"]


async def test_two_decision_sets_for_one_pause_apply_one(durable: DBOSAgent[str | None]) -> None:
    """Two deciders at once (here one after the other, before the workflow takes either)."""
    started = await durable.start("refund A1", workflow_id="wf-twice")
    await _paused("wf-twice")
    durable.decide("wf-twice", {"c1": Approve(), "c2": Answer("first")})
    try:  # the workflow may have taken the first already: then the second is refused
        durable.decide("wf-twice", {"c1": Deny(), "c2": Answer("second")})
    except InvalidInput as exc:
        assert "not paused" in str(exc)
    run = await asyncio.wait_for(started.result(poll_seconds=0.05), 60)
    assert run.output == "refund: refunded A1; ask_customer: first" and refunds == ["A1"]


def test_a_paused_queued_run_keeps_its_place_in_its_workers_limit(tmp_path: Path) -> None:
    """DBOS counts a waiting workflow as running: with ``worker_concurrency=1`` the next run
    waits on the queue until the paused one is decided and ends."""
    refunds.clear()
    agent = Agent(FunctionModel(plan), tools=[refund, ask_customer])
    durable = DBOSAgent(agent, name="slots", worker_concurrency=1)
    DBOS(
        config={
            "name": "agentloop-tests",
            "system_database_url": f"sqlite:///{tmp_path / 'slots.sqlite'}",
            "log_level": "ERROR",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()
    try:
        durable.enqueue("refund A1", workflow_id="slot-1")
        asyncio.run(_paused("slot-1"))
        second = durable.enqueue("refund A1", workflow_id="slot-2")
        time.sleep(2.5)  # two of the queue's polls (one a second): it is not taken
        assert DBOS.get_workflow_status("slot-2").status == "ENQUEUED"  # type: ignore[union-attr]
        DBOSAgent.decide("slot-1", {"c1": Deny(), "c2": Answer("x")})
        asyncio.run(_paused("slot-2"))  # taken once slot-1 ended
        DBOSAgent.decide("slot-2", {"c1": Deny(), "c2": Answer("y")})
        run = asyncio.run(asyncio.wait_for(second.result(poll_seconds=0.05), 60))
    finally:
        DBOS.destroy(destroy_registry=True)
    assert run.output == "refund: User denied permission; ask_customer: y"


def _child_plan(request: ModelRequest) -> Any:
    done = any(m.role == "tool" for m in request.messages)
    return "child done" if done else [call("refund", {"order": "A1"})]


def _parent_plan(request: ModelRequest) -> Any:
    results = [p for m in request.messages if m.role == "tool" for p in m.tool_results_parts]
    return f"parent read: {results[0].content}" if results else [call("helper", {"input": "go"})]


def test_a_child_agent_that_pauses_is_a_soft_error_recorded_as_such(tmp_path: Path) -> None:
    """Its pause would live in the process only: the model reads why, and a replay agrees."""
    refunds.clear()
    child = Agent(FunctionModel(_child_plan), tools=[refund])
    helper = child.as_tool(name="helper", description="Does refunds.")
    durable = DBOSAgent(Agent(FunctionModel(_parent_plan), tools=[helper]), name="nested")
    DBOS(
        config={
            "name": "agentloop-tests",
            "system_database_url": f"sqlite:///{tmp_path / 'nested.sqlite'}",
            "log_level": "ERROR",
        }
    )
    DBOS.launch()

    async def run_and_replay() -> tuple[Any, Any]:
        first = await durable.run("go", workflow_id="wf-nested")
        steps = len(await DBOS.list_workflow_steps_async("wf-nested"))
        fork = await DBOS.fork_workflow_async("wf-nested", steps + 1)
        return first, await fork.get_result()

    try:
        first, again = asyncio.run(run_and_replay())
    finally:
        DBOS.destroy(destroy_registry=True)
    assert not first.paused and refunds == []
    assert first.output == "parent read: " + PAUSED_CHILD_TEXT.format(name="helper")
    assert again.output == first.output


# -- a worker killed while paused, or inside the approved call ----------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """A DBOS system database URL for a name, on SQLite or on the session's PostgreSQL."""
    if request.param == "sqlite":
        return lambda name: f"sqlite:///{tmp_path / name}.sqlite"
    server = request.getfixturevalue("postgres_url")
    return lambda name: f"{server}/{name}"


def _child(url: str, effects: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    environ = {k: v for k, v in os.environ.items() if k != "KILL"}
    environ.update(DBOS_URL=url, EFFECTS=str(effects), EXECUTOR="worker", **env)
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _decider(url: str) -> None:
    """This process decides (a web server's part): it builds the agent, enqueues only."""
    sys.path.insert(0, str(HERE))
    import _dbos_pause_child

    _dbos_pause_child.build()
    DBOS(
        config={
            "name": "agentloop-tests",
            "system_database_url": url,
            "log_level": "ERROR",
            "application_version": "tests",
            "executor_id": "decider",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOSAgent.enqueue_only()
    DBOS.launch()


def _approve_when_paused(workflow_id: str) -> None:
    deadline = time.monotonic() + 60
    while not (pending := DBOSAgent.pending(workflow_id)):
        assert time.monotonic() < deadline, "the run never paused"
        time.sleep(0.05)
    [waiting] = pending
    assert (waiting.call.name, waiting.kind) == ("refund", "approval")
    DBOSAgent.decide(workflow_id, {waiting.id: Approve()})


def test_a_worker_killed_while_paused_loses_nothing(
    tmp_path: Path, database: Callable[[str], str]
) -> None:
    url, effects = database("dbos_paused_kill"), tmp_path / "effects"
    first = _child(url, effects, "run", "wf-kill", KILL="paused")
    _, err = first.communicate(timeout=120)
    assert first.returncode == -9, err
    try:
        _decider(url)
        assert len(DBOSAgent.pending("wf-kill")) == 1  # published before the kill, still there
        second = _child(url, effects, "recover", "wf-kill")  # recovers it: it waits again
        time.sleep(1)  # let it get back to its wait: the decision may come before or after
        _approve_when_paused("wf-kill")
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
    finally:
        DBOS.destroy(destroy_registry=True)
    assert out.strip() == "done: refunded A1"
    assert sorted(effects.read_text().split("\n")[:-1]) == ["refund A1", "work a"]


def test_a_worker_killed_inside_the_approved_call_does_not_run_it_again(
    tmp_path: Path, database: Callable[[str], str]
) -> None:
    url, effects = database("dbos_approved_kill"), tmp_path / "effects"
    first = _child(url, effects, "run", "wf-lost", KILL="refund")
    try:
        _decider(url)
        _approve_when_paused("wf-lost")
        _, err = first.communicate(timeout=120)
        assert first.returncode == -9, err  # the refund was done, its result never returned
        second = _child(url, effects, "recover", "wf-lost")
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
    finally:
        DBOS.destroy(destroy_registry=True)
    assert out.strip() == f"done: {LOST_TEXT}"
    assert sorted(effects.read_text().split("\n")[:-1]) == ["refund A1", "work a"]
