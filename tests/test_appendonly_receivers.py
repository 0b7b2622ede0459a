"""A filtered handoff's receiver on an append-only conversation (SPEC 26, 28): its base's tools.

A filtered handoff opens a conversation of its own for the receiver. Its base is built at its
first request, so the tools known then are in the base, also those the receiver's toolsets pick
per call (SPEC 22), and only later changes are entries. A receiver whose tools came only from
toolsets once got a base without tools and its tools as a first entry. A paused receiver's
continuation sends that same base again (it is kept with the pause).
"""

from __future__ import annotations

from typing import Any

from agentloop import Agent, Approve, handoff, tool
from agentloop.handoffs import remove_tool_calls
from agentloop.messages import Message, ToolChangePart
from agentloop.model import ModelRequest
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import FunctionToolset


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def cancel_plan(plan: str) -> str:
    """Cancel a plan."""
    return f"cancelled {plan}"


def append_only(steps: list[Any]) -> ScriptedModel:
    model = ScriptedModel(steps)
    model.append_only = True  # type: ignore[attr-defined]
    return model


def entries(request: ModelRequest) -> list[Message]:
    """The request's tool-change entries (system messages after the base)."""
    return [
        m
        for m in request.messages
        if m.role == "system" and any(type(p) is ToolChangePart for p in m.parts)
    ]


async def test_a_receiver_whose_tools_come_from_toolsets_has_them_in_its_base() -> None:
    billing_model = append_only([call("look", {"q": "A1"}), reply("billed")])
    billing = Agent(
        billing_model,
        name="billing",
        instructions="You bill.",
        toolsets=[FunctionToolset([look], name="billing_tools")],
    )
    triage = Agent(
        append_only([call("transfer_to_billing", {})]),
        instructions="You route.",
        handoffs=[handoff(billing, input_filter=remove_tool_calls)],
    )
    run = await triage.run("bill A1")
    assert run.output == "billed"
    first, second = billing_model.requests
    assert first.system == second.system == "You bill."
    assert [t.name for t in first.tools] == [t.name for t in second.tools] == ["look"]
    assert entries(first) == entries(second) == []  # in the base, not a first entry


async def test_a_paused_receiver_goes_on_with_the_base_its_toolsets_gave() -> None:
    tools = FunctionToolset([look, cancel_plan], name="billing_tools")
    billing_model = append_only([call("cancel_plan", {"plan": "pro"}, id="c1"), reply("Gone.")])
    billing = Agent(
        billing_model,
        name="billing",
        instructions="You bill.",
        toolsets=[tools.approval_required(lambda ctx, spec, arguments: spec.name == "cancel_plan")],
    )
    triage = Agent(
        append_only([call("transfer_to_billing", {})]),
        instructions="You route.",
        handoffs=[handoff(billing, input_filter=remove_tool_calls)],
    )
    paused = await triage.run("cancel my plan")
    assert paused.paused
    done = await triage.continue_run(decisions={"c1": Approve()})
    assert done.output == "Gone."
    before, after = billing_model.requests
    assert after.system == before.system == "You bill."
    assert list(after.tools) == list(before.tools)
    assert {t.name for t in before.tools} == {"look", "cancel_plan"}
    assert entries(before) == entries(after) == []


async def test_a_sub_agent_whose_tools_come_from_toolsets_has_them_in_its_base() -> None:
    child_model = append_only([call("look", {"q": "A1"}), reply("found it")])
    child = Agent(
        child_model,
        name="researcher",
        instructions="You research.",
        toolsets=[FunctionToolset([look], name="research_tools")],
    )
    parent = Agent(
        append_only([call("researcher", {"input": "A1?"}), reply("done")]),
        tools=[child.as_tool(name="researcher", description="Research something.")],
    )
    assert (await parent.run("look A1 up")).output == "done"
    first, second = child_model.requests
    assert [t.name for t in first.tools] == [t.name for t in second.tools] == ["look"]
    assert entries(first) == entries(second) == []
