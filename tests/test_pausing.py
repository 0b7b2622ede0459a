"""Pausing for people (SPEC 17): pending calls, decisions, the same run continued."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from agentloop import (
    Agent,
    Answer,
    Approve,
    Ask,
    Deny,
    Edit,
    Hook,
    PendingCall,
    RunConfig,
    ToolContext,
    tool,
)
from agentloop import events as ev
from agentloop.errors import InvalidInput
from agentloop.messages import ToolCallPart
from agentloop.model import ModelRequest
from agentloop.observers import Observer
from agentloop.pausing import LOST_TEXT
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.transcript import validate_transcript

pytestmark = pytest.mark.usefixtures("no_real_sleep")


class Events(Observer):
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append(event)


def results_of(request: ModelRequest) -> dict[str, tuple[str, bool]]:
    """The last tool message's results by call id: (content, is_error)."""
    return {r.call_id: (r.content, r.is_error) for r in request.messages[-1].tool_results_parts}


def make_agent(ran: list[Any], steps: list[Any], **kwargs: Any) -> tuple[Agent[Any], ScriptedModel]:
    @tool(requires_approval=True)
    def refund(order: str, amount: int) -> str:
        """Refund an order."""
        ran.append(("refund", order, amount))
        return f"refunded {amount} on {order}"

    @tool(external=True)
    def ask_customer(question: str) -> str:
        """Ask the customer in the app."""
        raise AssertionError("an external tool is never run by the agent")

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        ran.append(("lookup", order))
        return f"order {order}: 30 EUR"

    model = ScriptedModel(steps)
    return Agent(model, tools=[refund, ask_customer, lookup], **kwargs), model


def turn_with(*calls: Any) -> Any:
    """One reply with several tool calls."""
    from agentloop.messages import Message
    from agentloop.model import ModelResponse

    parts = tuple(ToolCallPart(c.id, c.name, c.arguments) for c in calls)
    return ModelResponse(Message("assistant", parts), stop_reason="tool_use")


async def test_a_call_that_needs_approval_pauses_the_run_after_the_turns_other_calls() -> None:
    ran: list[Any] = []
    steps = [
        turn_with(
            call("lookup", {"order": "A1"}, id="c1"),
            call("refund", {"order": "A1", "amount": 30}, id="c2"),
        ),
        reply("done"),
    ]
    recorder = Events()
    agent, model = make_agent(ran, steps, observers=[recorder])
    run = await agent.run("refund A1")
    assert run.paused and run.output is None and run.stop_reason is None
    assert ran == [("lookup", "A1")]  # the turn's other call ran; the refund did not
    assert run.pending == (PendingCall(run.pending[0].call, "approval", None),)
    assert run.pending[0].id == "c2" and run.pending[0].call.arguments == {
        "order": "A1",
        "amount": 30,
    }
    kinds = [type(e).__name__ for e in recorder.events]
    assert kinds[-2:] == ["RunPaused", "RunFinished"]
    # finalize's paused case: the paused turn is not committed
    assert [m.role for m in agent.history] == ["user"]
    assert len(model.requests) == 1

    continued = await agent.continue_run(decisions={"c2": Approve()})
    assert continued is run and run.id == continued.id
    assert not run.paused and run.output == "done"
    assert ran == [("lookup", "A1"), ("refund", "A1", 30)]
    assert results_of(model.requests[1]) == {
        "c1": ("order A1: 30 EUR", False),
        "c2": ("refunded 30 on A1", False),
    }
    assert len(run.turns) == 2
    assert [m.role for m in agent.history] == ["user", "assistant", "tool", "assistant"]
    validate_transcript(agent.history)
    assert run.decisions and run.decisions[0]["decisions"] == {"c2": {"kind": "approve"}}
    assert [type(e).__name__ for e in recorder.events].count("RunFinished") == 2


async def test_deny_edit_and_answer() -> None:
    ran: list[Any] = []
    steps = [
        turn_with(
            call("refund", {"order": "A1", "amount": 30}, id="c1"),
            call("refund", {"order": "B2", "amount": 99}, id="c2"),
            call("ask_customer", {"question": "which one?"}, id="c3"),
        ),
        reply("done"),
    ]
    agent, model = make_agent(ran, steps)
    run = await agent.run("refund")
    assert [(p.id, p.kind) for p in run.pending] == [
        ("c1", "approval"),
        ("c2", "approval"),
        ("c3", "external"),
    ]
    await agent.continue_run(
        decisions={
            "c1": Deny("too late"),
            "c2": Edit({"order": "B2", "amount": 9}),
            "c3": Answer({"pick": "B2"}),
        }
    )
    assert ran == [("refund", "B2", 9)]
    assert results_of(model.requests[1]) == {
        "c1": ("User denied permission: too late", True),
        "c2": ("refunded 9 on B2", False),
        "c3": ('{"pick": "B2"}', False),
    }


async def test_an_edit_with_invalid_arguments_is_the_usual_soft_validation_text() -> None:
    ran: list[Any] = []
    steps = [call("refund", {"order": "A1", "amount": 30}, id="c1"), reply("done")]
    agent, model = make_agent(ran, steps)
    await agent.run("refund")
    await agent.continue_run(decisions={"c1": Edit({"order": "A1", "amount": "lots"})})
    text, is_error = results_of(model.requests[1])["c1"]
    assert is_error and text.startswith("Invalid arguments for tool 'refund'")
    assert ran == []


async def test_a_plain_deny_reads_user_denied_permission() -> None:
    steps = [call("ask_customer", {"question": "?"}, id="c1"), reply("done")]
    agent, model = make_agent([], steps)
    await agent.run("x")
    await agent.continue_run(decisions={"c1": Deny()})
    assert results_of(model.requests[1])["c1"] == ("User denied permission", True)


class AskAlways(Hook):
    async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> Ask:
        return Ask(f"may I {call.name}?")


async def test_ask_without_an_approver_pauses_only_when_not_headless() -> None:
    ran: list[Any] = []
    steps = [call("lookup", {"order": "A1"}, id="c1"), reply("done")]
    agent, _ = make_agent(ran, steps, hooks=[AskAlways()], config=RunConfig(headless=False))
    run = await agent.run("x")
    assert run.pending == (PendingCall(run.pending[0].call, "approval", "may I lookup?"),)
    await agent.continue_run(decisions={"c1": Approve()})
    assert ran == [("lookup", "A1")]  # hooks are not asked again about a decided call

    headless, model2 = make_agent(
        ran, [call("lookup", {"order": "B"}, id="c1"), reply("ok")], hooks=[AskAlways()]
    )
    run2 = await headless.run("x")
    assert not run2.paused
    assert results_of(model2.requests[1])["c1"] == ("may I lookup?", True)


async def test_an_approver_answers_requires_approval_in_the_process() -> None:
    ran: list[Any] = []
    asked: list[str] = []

    async def approver(call: ToolCallPart, message: str) -> bool:
        asked.append(message)
        return True

    steps = [call("refund", {"order": "A1", "amount": 1}, id="c1"), reply("done")]
    agent, _ = make_agent(ran, steps, approver=approver)
    run = await agent.run("x")
    assert not run.paused and ran == [("refund", "A1", 1)]
    assert asked == ["tool 'refund' requires approval"]


async def test_a_sync_approver_runs_off_the_event_loop() -> None:
    """An approver waiting on input() must not freeze other runs (issue 21 item 6).

    The approver blocks until the event loop itself releases it: on the loop, it would wait
    out its timeout and deny.
    """
    loop = asyncio.get_running_loop()
    entered, release = asyncio.Event(), threading.Event()

    def approver(call: ToolCallPart, message: str) -> bool:
        loop.call_soon_threadsafe(entered.set)
        return release.wait(5)

    steps = [call("refund", {"order": "A1", "amount": 1}, id="c1"), reply("done")]
    ran: list[Any] = []
    agent, _ = make_agent(ran, steps, approver=approver)
    task = asyncio.create_task(agent.run("x"))
    await entered.wait()
    release.set()  # only reachable while the approver waits off the loop
    run = await task
    assert run.output == "done" and ran == [("refund", "A1", 1)]


@pytest.mark.parametrize(
    ("decisions", "says"),
    [
        ({}, "no decision for pending call 'c1'"),
        ({"c1": Approve(), "zz": Approve()}, "'zz', which is not a pending call"),
        ({"c1": Answer("x")}, "does not fit an approval call"),
        ({"c1": "yes"}, "not a decision"),
        (["c1"], "decisions must be a dict"),
    ],
)
async def test_a_bad_decision_set_is_invalid_input_and_changes_nothing(
    decisions: Any, says: str
) -> None:
    ran: list[Any] = []
    steps = [call("refund", {"order": "A1", "amount": 1}, id="c1"), reply("done")]
    agent, _ = make_agent(ran, steps)
    run = await agent.run("x")
    with pytest.raises(InvalidInput, match=says):
        await agent.continue_run(decisions=decisions)
    assert run.paused and run.decisions == [] and ran == []
    await agent.continue_run(decisions={"c1": Approve()})
    assert ran == [("refund", "A1", 1)]


async def test_answer_fits_only_external_calls() -> None:
    steps = [call("ask_customer", {"question": "?"}, id="c1"), reply("done")]
    agent, _ = make_agent([], steps)
    await agent.run("x")
    for wrong in (Approve(), Edit({"question": "!"})):
        with pytest.raises(InvalidInput, match="does not fit an external call"):
            await agent.continue_run(decisions={"c1": wrong})


async def test_decisions_for_a_run_that_is_not_paused_and_a_new_run_on_a_paused_one() -> None:
    ran: list[Any] = []
    steps = [reply("hi"), call("refund", {"order": "A", "amount": 1}, id="c1"), reply("done")]
    agent, _ = make_agent(ran, steps)
    await agent.run("hello")
    with pytest.raises(InvalidInput, match="is not paused"):
        await agent.continue_run(decisions={"c1": Approve()})
    await agent.run("refund")
    with pytest.raises(InvalidInput, match="continue_run"):
        await agent.run("something else")
    with pytest.raises(InvalidInput, match="pass continue_run\\(decisions="):
        await agent.continue_run()
    await agent.continue_run(decisions={"c1": Approve()})
    with pytest.raises(InvalidInput, match="is not paused"):
        await agent.continue_run(decisions={"c1": Approve()})  # a repeat runs nothing
    assert ran == [("refund", "A", 1)]


async def test_the_stream_shows_the_pause_and_continue_stream_the_rest() -> None:
    steps = [call("refund", {"order": "A", "amount": 1}, id="c1"), reply("done")]
    agent, _ = make_agent([], steps)
    async with agent.stream("x") as events:
        seen = [e async for e in events]
    assert isinstance(seen[-2], ev.RunPaused) and isinstance(seen[-1], ev.RunFinished)
    assert seen[-2].pending == events.run.pending
    async with agent.continue_stream(decisions={"c1": Approve()}) as events:
        rest = [e async for e in events]
    assert isinstance(rest[0], ev.RunStarted) and isinstance(rest[-1], ev.RunFinished)
    assert events.run.output == "done"
    finished = [e for e in rest if isinstance(e, ev.ToolCallFinished)]
    assert [e.result.content for e in finished] == ["refunded 1 on A"]


async def test_a_paused_run_is_stored_and_continued_by_another_agent(tmp_path: Path) -> None:
    ran: list[Any] = []
    store = SQLiteStore(tmp_path / "runs.db")
    steps = [call("refund", {"order": "A", "amount": 5}, id="c1"), reply("done")]
    agent, _ = make_agent(ran, steps, store=store, session_id="s1")
    run = await agent.run("refund A")
    assert run.paused
    stored = store.load_run(run.id)
    assert stored is not None and stored.run.paused
    assert [p.id for p in stored.run.pending] == ["c1"]

    # another process: a new agent on the same store
    ran2: list[Any] = []
    other, model2 = make_agent(ran2, [reply("done")])
    resumed = Agent.resume("s1", store=store, client=model2, tools=list(other.registry))
    assert resumed.current_run is not None and resumed.current_run.paused
    finished = await resumed.continue_run(decisions={"c1": Approve()})
    assert finished.id == run.id and finished.output == "done"
    assert ran == [] and ran2 == [("refund", "A", 5)]
    record = store.load_run(run.id)
    assert record is not None and not record.run.paused and record.run.output == "done"
    assert record.run.decisions[0]["decisions"] == {"c1": {"kind": "approve"}}
    validate_transcript(store.load_history("s1"))


async def test_an_approved_call_that_started_is_not_run_again(tmp_path: Path) -> None:
    """The journal marks a decided call started before it runs (at most once, SPEC 17)."""
    store = SQLiteStore(tmp_path / "runs.db")
    steps = [call("refund", {"order": "A", "amount": 5}, id="c1"), reply("done")]
    agent, _ = make_agent([], steps, store=store, session_id="s1")
    run = await agent.run("refund A")
    store.save_step("s1", run.id, "decided/c1/started", {"arguments": {}})  # a crash left this
    run.decisions.append({"at": 0.0, "decisions": {"c1": {"kind": "approve"}}})
    store.finish_runs("s1", [run], keep=len(agent.history), append=())
    ran: list[Any] = []
    other, model2 = make_agent(ran, [reply("done")])
    resumed = Agent.resume("s1", store=store, client=model2, tools=list(other.registry))
    with pytest.raises(InvalidInput, match="already decided"):
        await resumed.continue_run(decisions={"c1": Approve()})
    await resumed.continue_run()  # finishes with the recorded decisions
    assert ran == []
    assert results_of(model2.requests[0])["c1"] == (LOST_TEXT, True)


async def test_the_continued_run_keeps_its_own_settings_and_paused_time_is_not_wall_clock(
    tmp_path: Path,
) -> None:
    from agentloop import Budget, ModelSettings
    from agentloop.testing import FakeClock

    clock = FakeClock()
    steps = [call("refund", {"order": "A", "amount": 1}, id="c1"), reply("done")]
    store = SQLiteStore(tmp_path / "runs.db")
    agent, model = make_agent([], steps, clock=clock, store=store, session_id="s")
    settings = ModelSettings(temperature=0.25)
    await agent.run("x", model_settings=settings, usage_limits=Budget(wall_clock=60))
    clock.advance(3600)  # an hour paused: not the run's wall clock
    run = await agent.continue_run(decisions={"c1": Approve()})
    assert run.output == "done"
    assert model.requests[1].settings.temperature == 0.25

    # another process: the options come back from the record
    steps2 = [call("refund", {"order": "B", "amount": 1}, id="c2"), reply("done")]
    agent2, _ = make_agent([], steps2, clock=clock, store=store, session_id="t")
    await agent2.run("y", model_settings=settings, usage_limits=Budget(wall_clock=60))
    model3 = ScriptedModel([reply("done")])
    tools = list(agent2.registry)
    resumed = Agent.resume("t", store=store, client=model3, tools=tools, clock=clock)
    clock.advance(3600)
    await resumed.continue_run(decisions={"c2": Approve()})
    assert model3.requests[0].settings.temperature == 0.25
