"""An A2A client is never asked to decide a call whose arguments do not validate (SPEC 17, 26).

The engine validates a call's arguments before it becomes pending: the model reads the soft
``Invalid arguments for tool ...`` text in the same turn and fixes its call, and the task's
``INPUT_REQUIRED`` status lists only the fixed call. Official a2a-sdk client, real HTTP.
"""

from __future__ import annotations

import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from agentloop import Agent, tool
from agentloop.testing import ScriptedModel, call, reply

from ._serve import client, send, serving, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

RAN: list[int] = []


@tool(requires_approval=True)
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    RAN.append(amount)
    return f"refunded {amount} on {order}"


async def test_input_required_lists_only_the_call_that_validates() -> None:
    RAN.clear()
    model = ScriptedModel(
        [
            call("refund", {"order": "A1", "amount": "lots"}, id="c1"),
            call("refund", {"order": "A1", "amount": 30}, id="c2"),
            reply("Refunded."),
        ]
    )
    app = Agent(model, tools=[refund]).to_a2a(name="shop")
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("refund A1"))
        task = paused.task
        assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
        waiting = json_format.MessageToDict(task.status.message.parts[0].data)
        assert [(p["id"], p["arguments"]) for p in waiting["pending"]] == [
            ("c2", {"order": "A1", "amount": 30})
        ]
        read = model.requests[1].messages[-1].tool_results_parts[0]
        assert read.is_error and read.content.startswith("Invalid arguments for tool 'refund'")
        ids = {"task_id": task.id, "context_id": task.context_id}
        [done] = await send(made, user(**ids, data={"decisions": {"c2": "approve"}}))
        assert done.task.status.state == pb.TASK_STATE_COMPLETED
    assert RAN == [30]
