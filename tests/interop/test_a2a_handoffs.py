"""A remote caller decides a handoff receiver's call (SPEC 17, 26), through the official client.

The run paused in the receiver: the follow-up's approval is checked against the agent of that
turn (the receiver, which has the tool), not the starting agent (which does not), and the same
run completes there.
"""

from __future__ import annotations

from a2a.types import a2a_pb2 as pb

from agentloop import Agent, tool
from agentloop.testing import ScriptedModel, call, reply

from ._serve import client, send, serving, user

REFUNDED: list[str] = []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    REFUNDED.append(order)
    return f"refunded {order}"


async def test_a_follow_up_approves_the_receiver_s_call() -> None:
    REFUNDED.clear()
    steps = [call("refund", {"order": "A1"}, id="c1"), reply("Refunded A1.")]
    billing = Agent(ScriptedModel(steps), name="billing", tools=[refund])
    front = Agent(ScriptedModel([call("transfer_to_billing", {})]), handoffs=[billing])
    async with serving(front.to_a2a(name="shop")) as url, client(url) as made:
        [paused] = await send(made, user("refund A1"))
        assert paused.task.status.state == pb.TASK_STATE_INPUT_REQUIRED
        ids = {"task_id": paused.task.id, "context_id": paused.task.context_id}
        [done] = await send(made, user(**ids, data={"decisions": {"c1": "approve"}}))
    assert done.task.status.state == pb.TASK_STATE_COMPLETED
    assert REFUNDED == ["A1"]
    [artifact] = done.task.artifacts
    assert artifact.parts[0].text == "Refunded A1."
