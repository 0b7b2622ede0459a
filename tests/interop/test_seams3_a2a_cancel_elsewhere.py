"""A2A ``CancelTask`` while another face continues the task's run (SPEC 17 x SPEC 26).

The app serves a conversation over A2A and also lets an operator decide from its own face (the
API on the same ``Session``: a viewer, a back office). While that face's continuation runs, the
A2A client's ``CancelTask`` did nothing: it fired the token of A2A's own, finished, driver and
answered at once with the task still ``WORKING``; the run went on to the end. It now cancels the
run (``Session.cancel``: finalized as ``Cancelled``, the task ``CANCELED``). A run continued by
another *process* cannot be cancelled from here: the answer says so (``TaskNotCancelable``,
-32002) instead of an internal error, and nothing changes. Official a2a-sdk client, real HTTP.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotCancelableError

from agentloop import Agent, Approve, ToolContext, tool
from agentloop.a2a import A2AApp
from agentloop.errors import Cancelled
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

from ._serve import client, send, serving, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class Gate:
    """A tool that waits until released, and tells when it started and whether it was cut."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.cut = False

    def tool(self) -> Any:
        @tool(requires_approval=True)
        async def wire(ctx: ToolContext, order: str) -> str:
            """Wire a refund."""
            self.entered.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cut = True
                raise
            return f"wired {order}"

        return wire


async def test_cancel_task_cancels_a_continuation_another_face_runs() -> None:
    gate = Gate()
    model = ScriptedModel([call("wire", {"order": "A6"}, id="c1"), reply("Wired.")])
    agent = Agent(model, tools=[gate.tool()])
    app = A2AApp(agent, name="shop", session=lambda request, cid: agent.session(cid))
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("wire A6"))
        task = paused.task
        session = agent.session(task.context_id)
        going = asyncio.create_task(session.continue_run(decisions={"c1": Approve()}))
        await gate.entered.wait()
        done = await made.cancel_task(pb.CancelTaskRequest(id=task.id))
        assert done.status.state == pb.TASK_STATE_CANCELED
        with pytest.raises(Cancelled):  # the other face reads the run's end
            await going
        run = session.runs[-1]
        assert run.id == task.id and isinstance(run.stop_reason, Cancelled) and gate.cut
        seen = await made.get_task(pb.GetTaskRequest(id=task.id))
        assert seen.status.state == pb.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await made.cancel_task(pb.CancelTaskRequest(id=task.id))
        assert len(model.requests) == 1  # the run never asked the model after its tool
        [again] = await send(made, user("hello", context_id=task.context_id))
        assert again.task.status.state == pb.TASK_STATE_COMPLETED  # the context goes on


async def test_cancel_task_on_a_run_another_process_continues_says_it_cannot(
    tmp_path: Path,
) -> None:
    gate = Gate()
    store = SQLiteStore(tmp_path / "runs.db")
    agent = Agent(
        ScriptedModel([call("wire", {"order": "A7"}, id="c1")]), tools=[gate.tool()], store=store
    )
    app = A2AApp(agent, name="shop", session=lambda request, cid: agent.session(cid))
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("wire A7"))
        task = paused.task
        worker = Agent.resume(  # another process's agent on the same store (a worker, the CLI)
            task.context_id,
            store=store,
            client=ScriptedModel([reply("A7 wired.")]),
            tools=[gate.tool()],
        )
        going = asyncio.create_task(worker.continue_run(decisions={"c1": Approve()}))
        await gate.entered.wait()  # its call runs there: that process holds the session
        with pytest.raises(TaskNotCancelableError, match="another process"):
            await made.cancel_task(pb.CancelTaskRequest(id=task.id))
        gate.release.set()
        assert (await going).output == "A7 wired."
        seen = await made.get_task(pb.GetTaskRequest(id=task.id))
        assert seen.status.state == pb.TASK_STATE_COMPLETED
    store.close()
