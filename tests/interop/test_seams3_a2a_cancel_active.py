"""``CancelTask`` on an A2A task whose run another face of the app is running (SPEC 17 x 26).

The app serves its sessions over A2A and also continues a paused run from its own face (an
operator's approval in a back office, on the same ``Session``). While that continuation runs,
the task reads ``WORKING``; the A2A client's ``CancelTask`` then did nothing: it answered the
task as ``WORKING`` and the run went on to its end, so what the client asked to stop (a refund
being wired) happened anyway. Now ``CancelTask`` cancels the run it names wherever it runs in
this process (the session's own signal, fired only while that very run is active) and answers
once it ended: ``CANCELED``, the continuing face reading ``Cancelled``. Official a2a-sdk client
over uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import asyncio

import pytest
from a2a.types import a2a_pb2 as pb

from agentloop import Agent, Approve, ToolContext, tool
from agentloop.a2a import A2AApp
from agentloop.errors import Cancelled
from agentloop.testing import ScriptedModel, call, reply

from ._serve import client, send, serving, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


async def test_cancel_task_stops_a_run_another_face_is_continuing() -> None:
    entered, wired = asyncio.Event(), []

    @tool(requires_approval=True)
    async def wire(ctx: ToolContext, order: str) -> str:
        """Wire a refund."""
        entered.set()
        await ctx.cancel.wait()  # a long transfer that stops when the run is cancelled
        return "stopped"

    @tool
    def confirm(order: str) -> str:
        """Confirm a refund to the customer."""
        wired.append(order)
        return f"confirmed {order}"

    steps = [call("wire", {"order": "A6"}, id="c1"), call("confirm", {"order": "A6"}), reply("ok")]
    agent = Agent(ScriptedModel(steps), tools=[wire, confirm])
    app = A2AApp(agent, name="shop", session=lambda request, cid: agent.session(cid))
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("wire A6"))
        task = paused.task
        assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
        session = agent.session(task.context_id)
        going = asyncio.create_task(session.continue_run(decisions={"c1": Approve()}))
        await entered.wait()
        cancelled = await made.cancel_task(pb.CancelTaskRequest(id=task.id))
        assert cancelled.status.state == pb.TASK_STATE_CANCELED
        with pytest.raises(Cancelled):
            await going
        seen = await made.get_task(pb.GetTaskRequest(id=task.id))
        assert seen.status.state == pb.TASK_STATE_CANCELED
        assert wired == []  # the run stopped: its next step never ran
        again = await session.run("confirm A6 after all")  # the cancel reached that run only
        assert again.output == "ok" and wired == ["A6"]
