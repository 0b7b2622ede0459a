"""``CancelTask`` while a follow-up's decisions are still being checked (SPEC 17 x 26).

A follow-up approves a paused task's call; before its run continues, the app's ``deps=``
callable is awaited (a user lookup). A ``CancelTask`` that arrived then answered
``INPUT_REQUIRED`` and the approved call ran anyway: the client was told nothing was stopped
only by reading the state, and what it asked to stop (a refund) happened. Now the cancel wins:
the continuation starts already cancelled (its decision recorded, nothing run) and both the
cancel and the follow-up read ``CANCELED``. When the follow-up's checks fail instead, the cancel
ends the paused run as a cancel does. Official a2a-sdk client over uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InternalError

from agentloop import Agent, tool
from agentloop.a2a import A2AApp
from agentloop.errors import Cancelled
from agentloop.testing import ScriptedModel, call, reply

from ._serve import client, send, serving, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class Shop:
    """An agent whose approval tool records what it refunded, and a ``deps=`` that can be held."""

    def __init__(self) -> None:
        self.refunded: list[str] = []
        self.asked = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0
        self.fail = False

        @tool(requires_approval=True)
        def refund(order: str) -> str:
            """Refund an order."""
            self.refunded.append(order)
            return f"refunded {order}"

        steps = [call("refund", {"order": "A9"}, id="c1"), reply("Refunded A9.")]
        self.agent = Agent(ScriptedModel(steps), tools=[refund])

    async def deps(self, request: Any, message: Any) -> str:
        self.calls += 1
        if self.calls > 1:  # the follow-up's: held until the test lets it go
            self.asked.set()
            await self.release.wait()
            if self.fail:
                raise ConnectionError("the user directory is down")
        return "ada"


async def reached(app: A2AApp, task_id: str, cancelling: asyncio.Task[Any]) -> None:
    """Until the server's handler has fired the task's cancel token (or answered already)."""
    record = app.handler._tasks[task_id]
    for _ in range(2000):
        if cancelling.done() or record.cancel.cancelled:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the CancelTask never reached the task")


async def test_a_cancel_while_the_decisions_are_checked_wins() -> None:
    shop = Shop()
    app = A2AApp(shop.agent, name="shop", deps=shop.deps)
    async with serving(app) as url, client(url) as made, client(url) as other:
        [paused] = await send(made, user("refund A9"))
        task = paused.task
        assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
        ids = {"task_id": task.id, "context_id": task.context_id}
        approve = user(**ids, data={"decisions": {"c1": "approve"}})
        following = asyncio.create_task(send(made, approve))
        await shop.asked.wait()  # the follow-up's checks await the app's deps=
        cancelling = asyncio.create_task(other.cancel_task(pb.CancelTaskRequest(id=task.id)))
        await reached(app, task.id, cancelling)  # the cancel reached the server meanwhile
        shop.release.set()
        cancelled = await cancelling
        [answered] = await following
        seen = await made.get_task(pb.GetTaskRequest(id=task.id))
    assert cancelled.status.state == pb.TASK_STATE_CANCELED
    assert answered.task.status.state == pb.TASK_STATE_CANCELED
    assert seen.status.state == pb.TASK_STATE_CANCELED
    assert shop.refunded == []  # the approved call never ran
    [run] = shop.agent.session(task.context_id).runs
    assert isinstance(run.stop_reason, Cancelled) and not run.paused
    assert [d["decisions"] for d in run.decisions] == [{"c1": {"kind": "approve"}}]  # recorded


async def test_a_cancel_while_checks_that_fail_ends_the_paused_run() -> None:
    shop = Shop()
    shop.fail = True
    app = A2AApp(shop.agent, name="shop", deps=shop.deps)
    async with serving(app) as url, client(url) as made, client(url) as other:
        [paused] = await send(made, user("refund A9"))
        task = paused.task
        ids = {"task_id": task.id, "context_id": task.context_id}
        approve = user(**ids, data={"decisions": {"c1": "approve"}})
        following = asyncio.create_task(send(made, approve))
        await shop.asked.wait()
        cancelling = asyncio.create_task(other.cancel_task(pb.CancelTaskRequest(id=task.id)))
        await reached(app, task.id, cancelling)
        shop.release.set()
        cancelled = await cancelling
        with pytest.raises(InternalError):
            await following
    assert cancelled.status.state == pb.TASK_STATE_CANCELED
    assert shop.refunded == []
    [run] = shop.agent.session(task.context_id).runs
    assert isinstance(run.stop_reason, Cancelled) and not run.paused
