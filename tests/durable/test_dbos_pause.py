"""``DBOSAgent`` runs that pause (SPEC 17, 25): the pause is recorded and the workflow ends.

In process (SQLite; the queue test on PostgreSQL too): a run with a call needing approval
publishes its pending calls (``DBOSAgent.pending``) and its workflow ends (it holds no worker
and no queue slot: with ``worker_concurrency=1`` the next run on the queue runs while it
waits); ``DBOSAgent.decide`` checks a decision set as ``continue_run`` does (``InvalidInput``,
nothing recorded), records it (the first set wins: a second, even racing, is ``InvalidInput``)
and enqueues the run's continuation; ``durable.run`` returns the run's end, paused time
included. Approve runs the call once, Deny and Answer answer it without running anything; a run
pauses twice; a paused run is cancelled. In child processes, on SQLite and on PostgreSQL: a
worker SIGKILLed after its run paused loses nothing; a decider SIGKILLed between recording the
decision and enqueueing the continuation loses nothing (its restart enqueues it); a worker
SIGKILLed after taking the continuation, before the call, runs it once on recovery; one
SIGKILLed inside the approved call (its side effect done, its result never returned) does not
run it again: the model reads ``LOST_TEXT``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="DBOSAgent tests need the dbos extra")

from dbos import DBOS

from agentloop import Agent, Answer, Approve, Deny, Edit
from agentloop.durable._dbos_pause import DECIDERS
from agentloop.durable.dbos import PAUSED_CHILD_TEXT, DBOSAgent
from agentloop.errors import Cancelled, InvalidInput
from agentloop.model import ModelRequest
from agentloop.pausing import LOST_TEXT, Decision
from agentloop.testing import FunctionModel, call

HERE = Path(__file__).parent
CHILD = HERE / "_dbos_pause_child.py"

sys.path.insert(0, str(HERE))

from _pause_plan import ask_customer, dbos_launched, dbos_paused, plan, refund, refunds  # noqa: E402


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[DBOSAgent[str | None]]:
    refunds.clear()
    agent = DBOSAgent(Agent(FunctionModel(plan), tools=[refund, ask_customer]), name="approvals")
    with dbos_launched(tmp_path / "dbos.sqlite"):
        yield agent


def _status(workflow_id: str) -> str | None:
    status = DBOS.get_workflow_status(workflow_id)
    return None if status is None else status.status


def _ended(workflow_id: str) -> None:
    """Wait (60 s at most) for ``workflow_id``'s workflow to succeed: a paused run's ends."""
    deadline = time.monotonic() + 60
    while (status := _status(workflow_id)) != "SUCCESS":
        assert time.monotonic() < deadline, f"the paused run's workflow is still {status}"
        time.sleep(0.05)


async def test_a_paused_run_ends_its_workflow_and_decide_continues_it(
    durable: DBOSAgent[str | None],
) -> None:
    running = asyncio.ensure_future(durable.run("refund A1", workflow_id="wf-pause"))
    pending = await dbos_paused("wf-pause")
    assert [(p.id, p.kind, p.call.name) for p in pending] == [
        ("c1", "approval", "refund"),
        ("c2", "external", "ask_customer"),
    ]
    assert not running.done() and refunds == []
    deadline = time.monotonic() + 60
    while await asyncio.to_thread(_status, "wf-pause") != "SUCCESS":  # it ends once published
        assert time.monotonic() < deadline, "the paused run's workflow never ended"
        await asyncio.sleep(0.05)
    await asyncio.to_thread(
        durable.decide, "wf-pause", {"c1": Approve(), "c2": Answer("it arrived broken")}
    )
    assert DBOSAgent.pending("wf-pause") == ()  # decided: no longer paused, at once
    run = await asyncio.wait_for(running, 60)
    assert run.output == "refund: refunded A1; ask_customer: it arrived broken"
    assert run.id == "wf-pause" and not run.paused and refunds == ["A1"]
    with pytest.raises(InvalidInput, match="not paused"):  # a repeat is refused
        DBOSAgent.decide("wf-pause", {"c1": Approve(), "c2": Answer("again")})
    continued = await DBOS.get_workflow_status_async("wf-pause/continued/1")
    assert continued is not None and continued.queue_name == "agentloop.approvals"
    steps = [
        s["function_name"] for s in await DBOS.list_workflow_steps_async(continued.workflow_id)
    ]
    assert steps.count("approvals.tool.refund") == 1 and steps.count("approvals.model") == 2


async def test_deny_and_edit(durable: DBOSAgent[str | None]) -> None:
    denied = await durable.start("refund A1", workflow_id="wf-deny")
    await dbos_paused("wf-deny")
    durable.decide("wf-deny", {"c1": Deny("over the limit"), "c2": Deny()})
    run = await asyncio.wait_for(denied.result(poll_seconds=0.05), 60)
    assert run.output == (
        "refund: User denied permission: over the limit; ask_customer: User denied permission"
    )
    assert refunds == []
    edited = await durable.start("refund A1", workflow_id="wf-edit")
    await dbos_paused("wf-edit")
    durable.decide("wf-edit", {"c1": Edit({"order": "A2"}), "c2": Answer("ok")})
    run = await asyncio.wait_for(edited.result(poll_seconds=0.05), 60)
    assert run.output == "refund: refunded A2; ask_customer: ok" and refunds == ["A2"]


async def test_bad_decisions_are_invalid_input_and_nothing_is_sent(
    durable: DBOSAgent[str | None],
) -> None:
    started = await durable.start("refund A1", workflow_id="wf-bad")
    await dbos_paused("wf-bad")
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
    workflow, agent = DECIDERS["approvals"]  # a decider whose agent lacks the refund tool
    DECIDERS["approvals"] = (workflow, Agent(FunctionModel(plan), tools=[ask_customer]))
    try:
        with pytest.raises(InvalidInput, match="would run tool 'refund'"):
            DBOSAgent.decide("wf-bad", {"c1": Approve(), "c2": Answer("x")})
    finally:
        DECIDERS["approvals"] = (workflow, agent)
    assert len(DBOSAgent.pending("wf-bad")) == 2  # still paused on both
    with pytest.raises(InvalidInput, match="not paused"):
        DBOSAgent.decide("wf-nobody", {"c1": Approve()})
    durable.decide("wf-bad", {"c1": Approve(), "c2": Answer("x")})
    run = await asyncio.wait_for(started.result(poll_seconds=0.05), 60)
    assert run.output == "refund: refunded A1; ask_customer: x" and refunds == ["A1"]


async def test_two_decision_sets_for_one_pause_apply_one(durable: DBOSAgent[str | None]) -> None:
    """Two deciders at once: one set is recorded, the other is ``InvalidInput``, never dropped."""
    started = await durable.start("refund A1", workflow_id="wf-twice")
    await dbos_paused("wf-twice")
    sets: list[dict[str, Decision]] = [
        {"c1": Approve(), "c2": Answer("first")},
        {"c1": Deny(), "c2": Answer("second")},
    ]
    barrier = threading.Barrier(2)

    def decide(decisions: dict[str, Decision]) -> str:
        barrier.wait()
        try:
            DBOSAgent.decide("wf-twice", decisions)
        except InvalidInput as exc:
            return str(exc)
        return "won"

    outcomes = await asyncio.gather(*(asyncio.to_thread(decide, d) for d in sets))
    assert sorted(o == "won" for o in outcomes) == [False, True], outcomes
    [refused] = [o for o in outcomes if o != "won"]
    assert "is not paused" in refused
    run = await asyncio.wait_for(started.result(poll_seconds=0.05), 60)
    winner = sets[outcomes.index("won")]
    said = "first" if winner is sets[0] else "second"
    assert run.output.endswith(f"ask_customer: {said}")  # type: ignore[union-attr]
    assert refunds == (["A1"] if said == "first" else [])


def _twice(request: ModelRequest) -> Any:
    """Refund A1 (paused), then refund A2 (paused again), then say what both said."""
    results = [p for m in request.messages if m.role == "tool" for p in m.tool_results_parts]
    if len(results) < 2:
        return [call("refund", {"order": f"A{len(results) + 1}"}, id=f"r{len(results) + 1}")]
    return "; ".join(str(p.content) for p in results)


def _launched(url: str) -> None:
    DBOS(
        config={
            "name": "agentloop-tests",
            "system_database_url": url,
            "log_level": "ERROR",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()


def test_a_paused_run_holds_no_slot_of_its_workers_limit(database: Callable[[str], str]) -> None:
    """With ``worker_concurrency=1``, runs on the queue go on while earlier ones are paused;
    a run that pauses twice continues on the queue each time, and cancelling a paused run
    ends it as ``Cancelled``."""
    refunds.clear()
    durable = DBOSAgent(
        Agent(FunctionModel(_twice), tools=[refund]), name="slots", worker_concurrency=1
    )
    _launched(database("dbos_slots"))
    try:
        queued = [durable.enqueue("refunds", workflow_id=f"slot-{n}") for n in range(3)]
        for n in range(3):  # each pauses while the earlier ones wait: none holds the one slot
            asyncio.run(dbos_paused(f"slot-{n}"))
            _ended(f"slot-{n}")  # its workflow returns right after it publishes the pause
        for n in range(2):
            DBOSAgent.decide(f"slot-{n}", {"r1": Approve()})
        for n in range(2):  # each continuation pauses on its second call
            while [p.id for p in asyncio.run(dbos_paused(f"slot-{n}"))] != ["r2"]:
                time.sleep(0.05)
            DBOSAgent.decide(f"slot-{n}", {"r2": Deny() if n else Approve()})
        asyncio.run(queued[2].cancel())
        with pytest.raises(InvalidInput, match="not paused"):
            DBOSAgent.decide("slot-2", {"r1": Approve()})
        runs = [asyncio.run(asyncio.wait_for(q.result(poll_seconds=0.05), 60)) for q in queued[:2]]
        with pytest.raises(Cancelled):
            asyncio.run(asyncio.wait_for(queued[2].result(poll_seconds=0.05), 60))
    finally:
        DBOS.destroy(destroy_registry=True)
    assert [r.output for r in runs] == [
        "refunded A1; refunded A2",
        "refunded A1; User denied permission",
    ]
    assert sorted(refunds) == ["A1", "A1", "A2"]


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
    environ.update({"DBOS_URL": url, "EFFECTS": str(effects), "EXECUTOR": "worker", **env})
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


def test_a_worker_killed_after_its_run_paused_loses_nothing(
    tmp_path: Path, database: Callable[[str], str]
) -> None:
    url, effects = database("dbos_paused_kill"), tmp_path / "effects"
    first = _child(url, effects, "run", "wf-kill", KILL="paused")
    _, err = first.communicate(timeout=120)
    assert first.returncode == -9, err
    try:
        _decider(url)
        _approve_when_paused("wf-kill")  # published before the kill (its workflow may not
        # have returned yet: the restarted worker finishes it, and takes the continuation)
        second = _child(url, effects, "recover", "wf-kill")  # a worker takes the continuation
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
    finally:
        DBOS.destroy(destroy_registry=True)
    assert out.strip() == "done: refunded A1"
    assert sorted(effects.read_text().split("\n")[:-1]) == ["refund A1", "work a"]


def test_a_decider_killed_before_enqueueing_the_continuation_loses_nothing(
    tmp_path: Path, database: Callable[[str], str]
) -> None:
    """The decision is recorded, the process dies in its workflow; its restart enqueues it."""
    url, effects = database("dbos_decider_kill"), tmp_path / "effects"
    worker = _child(url, effects, "run", "wf-decider")
    decider = _child(url, effects, "decide", "wf-decider", KILL="fork", EXECUTOR="decider")
    said, err = decider.communicate(timeout=120)
    assert decider.returncode == -9, (said, err)
    again = _child(url, effects, "decide", "wf-decider", EXECUTOR="decider")  # recovers it
    said, err = again.communicate(timeout=120)
    assert again.returncode == 0 and said.strip() == "decided", err
    out, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err
    assert out.strip() == "done: refunded A1"
    assert sorted(effects.read_text().split("\n")[:-1]) == ["refund A1", "work a"]


def test_a_worker_killed_after_taking_the_continuation_runs_the_call_once(
    tmp_path: Path, database: Callable[[str], str]
) -> None:
    url, effects = database("dbos_taken_kill"), tmp_path / "effects"
    first = _child(url, effects, "run", "wf-taken", KILL="decided")
    try:
        _decider(url)
        _approve_when_paused("wf-taken")
        _, err = first.communicate(timeout=120)
        assert first.returncode == -9, err  # it took the continuation, then died
        second = _child(url, effects, "recover", "wf-taken")
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
