"""Handoffs (SPEC 26): the receiver takes over in the same run and session, without a request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest

from agentloop import Agent, Approve, RunConfig, RunContext, ToolContext, handoff, tool
from agentloop.errors import ConfigurationError, HandoffLimitExceeded
from agentloop.events import Event, HandoffOccurred, TurnFinished
from agentloop.handoffs import remove_tool_calls
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def triage_with(
    billing_model: ScriptedModel, triage_steps: list[Any], **options: Any
) -> tuple[Agent[Any], Agent[Any], ScriptedModel]:
    billing = Agent(billing_model, name="billing", system="You handle billing.", tools=[refund])
    triage_model = ScriptedModel(triage_steps)
    triage = Agent(triage_model, system="You route.", handoffs=[billing], **options)
    return triage, billing, triage_model


async def test_the_receiver_takes_over_in_the_same_run_and_session() -> None:
    billing_model = ScriptedModel([call("refund", {"order": "A1"}), reply("Refunded A1.")])
    triage, _, triage_model = triage_with(billing_model, [call("transfer_to_billing", {})])
    events: list[Event] = []
    async with triage.stream("refund my order A1") as stream:
        async for event in stream:
            events.append(event)
    run = stream.run
    assert run.output == "Refunded A1." and run.stop_reason is None
    assert [t.agent for t in run.turns] == [None, "billing", "billing"]
    assert run.last_agent == "billing"
    assert run.turns[0].tool_results[0].content == "Transferred to 'billing'."
    assert len(triage_model.requests) == 1 and len(billing_model.requests) == 2  # no extra request
    assert triage.runs == [run] and run.session_id == triage._default.id
    [occurred] = [e for e in events if isinstance(e, HandoffOccurred)]
    assert (occurred.from_agent, occurred.to_agent) == (None, "billing")
    finished = [e for e in events if isinstance(e, TurnFinished)]
    assert [e.agent for e in finished] == [None, "billing", "billing"]
    # the receiver's request: its own system prompt and tools, the whole transcript before
    request = billing_model.requests[0]
    assert request.system == "You handle billing."
    assert {t.name for t in request.tools} == {"refund"}
    assert request.messages[0].text == "refund my order A1"
    assert any(isinstance(p, ToolCallPart) for p in request.messages[1].parts)
    # the next run starts with the session's own agent
    triage_model.steps.append(reply("Hello again."))
    again = await triage.run("hi")
    assert again.output == "Hello again." and again.last_agent is None
    assert [t.agent for t in again.turns] == [None]


async def test_an_input_filter_shapes_what_the_receiver_sees_once() -> None:
    billing_model = ScriptedModel([reply("Done.")])
    billing = Agent(billing_model, name="billing")
    triage_model = ScriptedModel(
        [call("lookup_order", {"order": "A1"}), call("transfer_to_billing", {})]
    )

    @tool
    def lookup_order(order: str) -> str:
        """Look an order up."""
        return "paid"

    filtered = handoff(billing, input_filter=remove_tool_calls)
    triage = Agent(triage_model, tools=[lookup_order], handoffs=[filtered])
    run = await triage.run("refund A1")
    shown = billing_model.requests[0].messages
    assert all(
        not isinstance(p, ToolCallPart | ToolResultPart) for m in shown[:-1] for p in m.parts
    )
    assert shown[0].text == "refund A1"
    assert run.output == "Done."
    kept = triage.history  # committed history keeps everything
    assert sum(isinstance(p, ToolCallPart) for m in kept for p in m.parts) == 2


def test_remove_tool_calls_drops_calls_and_results() -> None:
    messages = [
        Message.user("hi"),
        Message("assistant", (ToolCallPart("c1", "x", {}),)),
        Message.tool_results([ToolResultPart("c1", "x", "ok")]),
        Message.assistant("done"),
    ]
    assert remove_tool_calls(messages) == [Message.user("hi"), Message.assistant("done")]


async def test_a_failing_filter_and_a_second_handoff_in_one_turn_are_refused_softly() -> None:
    def broken(messages: Any) -> Any:
        raise ValueError("nope")

    billing = Agent(ScriptedModel([]), name="billing")
    sales_model = ScriptedModel([reply("Sales here.")])
    sales = Agent(sales_model, name="sales")
    model = ScriptedModel(
        [
            call("transfer_to_billing", {}),
            [call("transfer_to_sales", {}), call("transfer_to_support", {})],
        ]
    )
    support = Agent(ScriptedModel([]), name="support")
    triage = Agent(model, handoffs=[handoff(billing, input_filter=broken), sales, support])
    run = await triage.run("help")
    assert run.turns[0].tool_results[0].content == "handoff to 'billing' failed: ValueError: nope"
    second = [r.content for r in run.turns[1].tool_results]
    assert second == ["Transferred to 'sales'.", "handoff refused: already transferring to 'sales'"]
    assert run.output == "Sales here." and run.last_agent == "sales"


async def test_max_handoffs_ends_the_run_hard() -> None:
    first = Agent(ScriptedModel([call("transfer_to_second", {})]), name="first")
    second = Agent(ScriptedModel([call("transfer_to_third", {})]), name="second")
    third = Agent(ScriptedModel([]), name="third")
    second_with = Agent(second.client, name="second", handoffs=[third])
    first_with = Agent(first.client, handoffs=[second_with], config=RunConfig(max_handoffs=1))
    with pytest.raises(HandoffLimitExceeded) as limited:
        await first_with.run("go")
    assert str(limited.value) == "more than 1 handoffs in one run" and limited.value.limit == 1
    assert first_with.runs[-1].stop_reason is limited.value


async def test_a_pause_in_the_receiver_continues_in_it() -> None:
    @tool(requires_approval=True)
    def cancel_plan(plan: str) -> str:
        """Cancel a plan."""
        return f"cancelled {plan}"

    billing_model = ScriptedModel([call("cancel_plan", {"plan": "pro"}, id="c1"), reply("Gone.")])
    billing = Agent(billing_model, name="billing", tools=[cancel_plan])
    triage = Agent(ScriptedModel([call("transfer_to_billing", {})]), handoffs=[billing])
    paused = await triage.run("cancel my plan")
    assert paused.paused and paused.last_agent == "billing"
    done = await triage.continue_run(decisions={"c1": Approve()})
    assert done.id == paused.id and done.output == "Gone."
    assert [t.agent for t in done.turns] == [None, "billing", "billing"]
    assert done.turns[1].tool_results[0].content == "cancelled pro"


async def test_a_receivers_pause_continues_in_it_from_the_store(tmp_path: Path) -> None:
    @tool(requires_approval=True)
    def cancel_plan(plan: str) -> str:
        """Cancel a plan."""
        return f"cancelled {plan}"

    store = SQLiteStore(tmp_path / "runs.db")

    def build(steps: list[Any], billing_steps: list[Any], sid: str | None = None) -> Agent[Any]:
        billing = Agent(
            ScriptedModel(billing_steps),
            name="billing",
            tools=[cancel_plan],
            instructions=lambda ctx: "You handle billing.",
        )
        return Agent(ScriptedModel(steps), handoffs=[billing], store=store, session_id=sid)

    steps = [call("transfer_to_billing", {})]
    first = build(steps, [call("cancel_plan", {"plan": "pro"}, id="c1")], "s1")
    paused = await first.run("cancel my plan")
    assert paused.paused and paused.last_agent == "billing"
    later_billing = ScriptedModel([reply("Gone.")])
    later = build([], [])
    later._handoffs[0].agent.client = later_billing  # the new process's receiver answers
    done = await later.session("s1").continue_run(decisions={"c1": Approve()})
    assert done.id == paused.id and done.output == "Gone." and done.last_agent == "billing"
    assert done.turns[1].tool_results[0].content == "cancelled pro"
    assert later_billing.requests[0].system == "You handle billing."  # evaluated at the handoff


async def test_the_run_context_names_the_active_agent() -> None:
    seen: list[Any] = []

    @tool
    def whoami(ctx: ToolContext[Any]) -> str:
        """Who runs this."""
        seen.append(("tool", ctx.agent))
        return "ok"

    def instructions(ctx: RunContext[Any]) -> str:
        seen.append(("instructions", ctx.agent))
        return "You handle billing."

    billing_model = ScriptedModel([call("whoami", {}), reply("done")])
    billing = Agent(billing_model, name="billing", instructions=instructions, tools=[whoami])
    triage = Agent(
        ScriptedModel([[call("whoami", {}), call("transfer_to_billing", {})]]),
        tools=[whoami],
        handoffs=[billing],
    )
    await triage.run("go")
    assert seen == [("tool", None), ("instructions", "billing"), ("tool", "billing")]


class Invoice(pydantic.BaseModel):
    total: int


def test_bad_handoffs_are_configuration_errors() -> None:
    model = ScriptedModel([])
    named = Agent(model, name="billing")
    cases: list[tuple[Any, str]] = [
        ([Agent(model)], "needs a name"),
        (["billing"], "takes agents"),
        ([named, named], "used twice"),
        ([Agent(model, name="billing", output_type=Invoice)], "output_type"),
        (
            [Agent(model, name="a", handoffs=[named]), handoff(Agent(model), name="billing")],
            "two agents",
        ),
    ]
    for handoffs, words in cases:
        with pytest.raises(ConfigurationError, match=words):
            Agent(model, handoffs=handoffs)

    with pytest.raises(ConfigurationError, match="letters, digits"):
        handoff(named, name="bad name")

    @tool
    def transfer_to_billing() -> str:
        """A tool with the handoff's name."""
        return ""

    @tool
    def billing() -> str:
        """A tool with the handoff's own name."""
        return ""

    for clash in (transfer_to_billing, billing):
        with pytest.raises(ConfigurationError, match="used twice"):
            Agent(model, tools=[clash], handoffs=[named])


def test_the_viewer_shows_the_agent_of_each_turn_after_a_handoff() -> None:
    pytest.importorskip("starlette")
    from agentloop.ui.viewer._turns import Nesting, turns_html

    billing = Agent(ScriptedModel([reply("ok")]), name="billing")
    run = Agent(ScriptedModel([call("transfer_to_billing", {})]), handoffs=[billing]).run_sync("go")
    restored = type(run).from_dict(run.to_dict())  # stored: the turns keep their agent
    html = turns_html(restored, Nesting([]))
    assert html.count('<span class="badge agent">agent billing</span>') == 1
    assert restored.last_agent == "billing"
