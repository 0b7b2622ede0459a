"""An A2A task whose paused run another face decided or cancelled (SPEC 17 x SPEC 26).

The app serves its sessions over A2A and also lets an operator decide from its own face (the
API on the same ``Session``: the viewer, a CLI, a back office). Once the run is continued or
cancelled there, the A2A client (the end user's software) must read the task's real end on
``GetTask``, and a follow-up must be refused as for a terminal task. Before, the task stayed
``INPUT_REQUIRED`` forever, with pending calls already decided: the client waited on nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError
from google.protobuf import json_format

from agentloop import Agent, Approve, tool
from agentloop.a2a import A2AApp
from agentloop.testing import ScriptedModel, call, reply

from ._serve import client, send, serving, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def _app(steps: list[Any]) -> tuple[A2AApp, dict[str, Any]]:
    agent = Agent(ScriptedModel(steps), tools=[refund])
    sessions: dict[str, Any] = {}

    def pick(request: Any, context_id: str) -> Any:
        return sessions.setdefault(context_id, agent.session(context_id))

    return A2AApp(agent, name="shop", session=pick), sessions


async def test_a_task_continued_by_another_face_reads_completed() -> None:
    app, sessions = _app([call("refund", {"order": "A1"}, id="c1"), reply("Refunded A1.")])
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("refund A1"))
        task = paused.task
        assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
        run = await sessions[task.context_id].continue_run(decisions={"c1": Approve()})
        assert run.output == "Refunded A1." and run.id == task.id
        seen = await made.get_task(pb.GetTaskRequest(id=task.id))
        assert seen.status.state == pb.TASK_STATE_COMPLETED
        assert seen.artifacts[0].parts[0].text == "Refunded A1."
        ids = {"task_id": task.id, "context_id": task.context_id}
        with pytest.raises(InvalidParamsError, match="completed"):
            await send(made, user(**ids, data={"decisions": {"c1": "approve"}}))


async def test_a_task_cancelled_by_another_face_reads_canceled() -> None:
    app, sessions = _app([call("refund", {"order": "A2"}, id="c1")])
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("refund A2"))
        task = paused.task
        await sessions[task.context_id].cancel_run()
        seen = await made.get_task(pb.GetTaskRequest(id=task.id))
        assert seen.status.state == pb.TASK_STATE_CANCELED


async def test_a_task_continued_from_the_store_elsewhere_reads_completed(tmp_path: Any) -> None:
    from agentloop.store import SQLiteStore

    store = SQLiteStore(tmp_path / "runs.db")
    agent = Agent(
        ScriptedModel([call("refund", {"order": "A3"}, id="c1")]), tools=[refund], store=store
    )
    app = A2AApp(agent, name="shop", session=lambda request, cid: agent.session(cid))
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("refund A3"))
        task = paused.task
        assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
        worker = Agent.resume(  # another process's agent on the same store (the CLI, a viewer)
            task.context_id, store=store, client=ScriptedModel([reply("A3 done.")]), tools=[refund]
        )
        assert (await worker.continue_run(decisions={"c1": Approve()})).output == "A3 done."
        seen = await made.get_task(pb.GetTaskRequest(id=task.id))
        assert seen.status.state == pb.TASK_STATE_COMPLETED
        assert seen.artifacts[0].parts[0].text == "A3 done."
    store.close()


async def test_a_task_paused_again_after_another_face_decided_shows_the_new_calls() -> None:
    steps = [
        call("refund", {"order": "A4"}, id="c1"),
        call("refund", {"order": "A5"}, id="c2"),
        reply("Both refunded."),
    ]
    app, sessions = _app(steps)
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("refund A4 and A5"))
        task = paused.task
        again = await sessions[task.context_id].continue_run(decisions={"c1": Approve()})
        assert [p.id for p in again.pending] == ["c2"]
        seen = await made.get_task(pb.GetTaskRequest(id=task.id))
        assert seen.status.state == pb.TASK_STATE_INPUT_REQUIRED
        waiting = json_format.MessageToDict(seen.status.message.parts[0].data)
        assert [p["id"] for p in waiting["pending"]] == ["c2"]
        ids = {"task_id": task.id, "context_id": task.context_id}
        [done] = await send(made, user(**ids, data={"decisions": {"c2": "approve"}}))
        assert done.task.status.state == pb.TASK_STATE_COMPLETED


async def test_a_task_being_continued_by_another_face_reads_working() -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    @tool(requires_approval=True)
    async def wire(order: str) -> str:
        """Wire a refund."""
        entered.set()
        await release.wait()
        return f"wired {order}"

    agent = Agent(
        ScriptedModel([call("wire", {"order": "A6"}, id="c1"), reply("Wired.")]), tools=[wire]
    )
    app = A2AApp(agent, name="shop", session=lambda request, cid: agent.session(cid))
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("wire A6"))
        task = paused.task
        session = agent.session(task.context_id)
        going = asyncio.create_task(session.continue_run(decisions={"c1": Approve()}))
        await entered.wait()
        seen = await made.get_task(pb.GetTaskRequest(id=task.id))
        assert seen.status.state == pb.TASK_STATE_WORKING
        ids = {"task_id": task.id, "context_id": task.context_id}
        with pytest.raises(InvalidParamsError, match="working"):
            await send(made, user(**ids, data={"decisions": {"c1": "approve"}}))
        release.set()
        assert (await going).output == "Wired."
        seen = await made.get_task(pb.GetTaskRequest(id=task.id))
        assert seen.status.state == pb.TASK_STATE_COMPLETED
