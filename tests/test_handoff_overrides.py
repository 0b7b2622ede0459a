"""``receiver.override(...)`` holds when the receiver takes a run over (SPEC 21, 26).

A test scripts a specialist with ``billing.override(model=ScriptedModel(...))`` and runs the
triage agent: after the handoff the scripted model answers, with the override's tools and
toolsets, and the receiver's real client is never called (in a real app: a real provider,
billed). Outside the block the receiver is itself again.
"""

from __future__ import annotations

from agentloop import Agent, tool
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import FunctionToolset


@tool
def charge(amount: int) -> str:
    """Charge the card (the real tool)."""
    return f"CHARGED {amount}"


@tool
def fake_charge(amount: int) -> str:
    """Charge nothing (the test's tool)."""
    return f"pretended {amount}"


@tool
def audit() -> str:
    """Audit (from a toolset)."""
    return "audited"


def results(run: object) -> list[str]:
    return [str(p.content) for m in run.messages for p in m.tool_results_parts]  # type: ignore[attr-defined]


async def test_a_receiver_s_override_answers_after_the_handoff() -> None:
    real = ScriptedModel([])  # any request to it fails: it has no step
    billing = Agent(real, name="billing", tools=[charge])
    triage = Agent(ScriptedModel([call("transfer_to_billing", {})]), handoffs=[billing])
    scripted = ScriptedModel(
        [call("fake_charge", {"amount": 5}), call("audit", {}), reply("all done")]
    )
    with billing.override(
        model=scripted, tools=[fake_charge], toolsets=[FunctionToolset([audit], name="ops")]
    ):
        run = await triage.run("refund me")
    assert run.output == "all done" and run.last_agent == "billing"
    assert results(run) == ["Transferred to 'billing'.", "pretended 5", "audited"]
    assert real.requests == []
    assert {s.name for s in scripted.requests[0].tools} == {"fake_charge", "audit"}


async def test_outside_the_block_the_receiver_is_itself() -> None:
    billing = Agent(ScriptedModel([reply("the real one")]), name="billing", tools=[charge])
    triage = Agent(
        ScriptedModel([call("transfer_to_billing", {}), call("transfer_to_billing", {})]),
        handoffs=[billing],
    )
    with billing.override(model=ScriptedModel([reply("scripted")])):
        assert (await triage.run("one")).output == "scripted"
    assert (await triage.run("two")).output == "the real one"
