"""Where handoffs (SPEC 26) meet the other features: the receiver's guardrails and tool sources.

After a handoff the receiver's output guardrails judge the answer (the starting agent's input
guardrails stay), its MCP servers are listed again on a list change, and the starting agent's
``aclose`` stops the MCP servers of every agent its handoffs reach. The receiver's toolsets
rule; the run's memory recall block stays (memory is the starting agent's).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from agentloop import Agent, Approve, handoff, tool
from agentloop.guardrails import GuardrailContext, InputGuardrail, OutputGuardrail
from agentloop.handoffs import remove_tool_calls
from agentloop.mcp import MCPServer
from agentloop.memory import InMemoryMemoryStore, Memory
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import FunctionToolset

FAULTY = Path(__file__).parent / "mcp_servers" / "faulty.py"


def no_refunds(ctx: GuardrailContext[Any], value: Any) -> str | None:
    return "refunds are not promised" if "refund" in str(value).lower() else None


def never(ctx: GuardrailContext[Any], value: Any) -> str | None:
    return "the starting agent's output guardrail ran" if value else None


async def test_the_receivers_output_guardrails_judge_its_answer() -> None:
    checked_inputs: list[str] = []

    def record_input(ctx: GuardrailContext[Any], value: Any) -> None:
        checked_inputs.append(str(value))

    billing_model = ScriptedModel([reply("We refund you."), reply("We will look into it.")])
    billing = Agent(
        billing_model,
        name="billing",
        system="You handle billing.",
        guardrails=[OutputGuardrail(no_refunds, retry=True)],
    )
    triage = Agent(
        ScriptedModel([call("transfer_to_billing", {})]),
        system="You route.",
        handoffs=[billing],
        guardrails=[InputGuardrail(record_input), OutputGuardrail(never)],
    )
    run = await triage.run("my order A1")
    assert run.output == "We will look into it."  # the receiver's guardrail sent it back once
    retried = billing_model.requests[1].messages[-1].text
    assert retried == "Output rejected: refunds are not promised"
    assert checked_inputs == ["my order A1"]  # the starting agent's input guardrail, once


async def test_a_receiver_without_guardrails_is_not_judged_by_the_starting_agents() -> None:
    billing = Agent(ScriptedModel([reply("Done.")]), name="billing")
    triage = Agent(
        ScriptedModel([call("transfer_to_billing", {})]),
        handoffs=[billing],
        guardrails=[OutputGuardrail(never)],
    )
    run = await triage.run("hi")
    assert run.output == "Done." and run.stop_reason is None


async def test_the_receivers_mcp_server_is_listed_again_and_closed_with_the_start(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "MARKER_DIR": str(tmp_path)}
    mcp = MCPServer.stdio(sys.executable, [str(FAULTY)], env=env, name="faulty")
    billing_model = ScriptedModel([call("grow", {}), call("late", {}), reply("done")])
    billing = Agent(billing_model, name="billing", tools=[mcp])
    triage = Agent(ScriptedModel([call("transfer_to_billing", {})]), handoffs=[billing])
    run = await triage.run("grow it")
    assert run.output == "done"
    offered = [{t.name for t in r.tools} for r in billing_model.requests]
    assert "late" not in offered[0] and "late" in offered[1]  # the list change was seen
    assert run.turns[2].tool_results[0].content == "late tool"
    assert mcp._conn is not None
    await triage.aclose()
    assert mcp._conn is None  # the starting agent's aclose stopped the receiver's server


async def test_aclose_reaches_every_receiver_once(tmp_path: Path) -> None:
    env = {**os.environ, "MARKER_DIR": str(tmp_path)}
    mcp = MCPServer.stdio(sys.executable, [str(FAULTY)], env=env, name="faulty")
    deep = Agent(ScriptedModel([reply("deep")]), name="deep", tools=[mcp])
    middle = Agent(ScriptedModel([call("transfer_to_deep", {})]), name="middle", handoffs=[deep])
    start = Agent(ScriptedModel([call("transfer_to_middle", {})]), handoffs=[handoff(middle)])
    run = await start.run("go")
    assert run.output == "deep" and mcp._conn is not None
    await start.aclose()
    assert mcp._conn is None


async def test_the_receivers_toolsets_rule_after_the_handoff() -> None:
    mine = FunctionToolset(name="mine")
    theirs = FunctionToolset(name="theirs")

    @mine.tool
    def route(to: str) -> str:
        """Route somewhere."""
        return to

    @theirs.tool
    def bill(order: str) -> str:
        """Bill an order."""
        return f"billed {order}"

    billing_model = ScriptedModel([call("bill", {"order": "A1"}), reply("billed")])
    billing = Agent(billing_model, name="billing", toolsets=[theirs])
    triage = Agent(
        ScriptedModel([call("transfer_to_billing", {})]), toolsets=[mine], handoffs=[billing]
    )
    run = await triage.run("bill A1")
    assert run.output == "billed"
    assert run.turns[1].tool_results[0].content == "billed A1"
    assert [{t.name for t in r.tools} for r in billing_model.requests] == [{"bill"}, {"bill"}]


async def test_the_runs_recall_block_stays_at_a_handoff() -> None:
    store = InMemoryMemoryStore()
    await store.put(("user", "ada"), "ada prefers refunds by card")
    billing_model = ScriptedModel([reply("done")])
    billing = Agent(billing_model, name="billing", system="You handle billing.")
    triage = Agent(
        ScriptedModel([call("transfer_to_billing", {})]),
        system="You route.",
        handoffs=[billing],
        memory=Memory(store, namespace=lambda ctx: ("user", "ada"), auto_recall=3),
    )
    await triage.run("refunds by card please")
    system = billing_model.requests[0].system or ""
    assert system.startswith("You handle billing.")
    assert "ada prefers refunds by card" in system  # memory stays the starting agent's


async def test_a_paused_filtered_receiver_continues_with_its_view_and_instructions() -> None:
    @tool(requires_approval=True)
    def cancel_plan(plan: str) -> str:
        """Cancel a plan."""
        return f"cancelled {plan}"

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return "paid"

    billing_model = ScriptedModel([call("cancel_plan", {"plan": "pro"}, id="c1"), reply("Gone.")])
    billing = Agent(billing_model, name="billing", system="You bill.", tools=[cancel_plan])
    triage = Agent(
        ScriptedModel([call("lookup", {"order": "A1"}), call("transfer_to_billing", {})]),
        instructions=lambda ctx: "You route.",
        tools=[lookup],
        handoffs=[handoff(billing, input_filter=remove_tool_calls)],
    )
    paused = await triage.run("cancel my plan")
    assert paused.paused
    done = await triage.continue_run(decisions={"c1": Approve()})
    assert done.output == "Gone."
    before, after = billing_model.requests
    assert after.system == before.system == "You bill."  # not the starting agent's function
    assert after.messages[0].text == "cancel my plan"
    assert not any(p.name == "lookup" for m in after.messages for p in m.tool_calls)  # filtered
