"""An A2A task's approval kept for the operator: the caller's decision is refused, nothing changes.

Found by building an ops service from the docs alone: its agent's ``purge_queue`` (approval
required, irreversible) was reachable over A2A, and interop.md said only that the caller decides
an ``INPUT_REQUIRED`` task, so the calling agent could approve its own purge. The app's
``deps=`` is called for the follow-up too: refusing one that carries decisions with
``PermissionError`` answers 403, records nothing, keeps the task ``INPUT_REQUIRED`` (a later
follow-up is not stuck behind the refused one), and the operator's ``continue_run`` from the
store (here a second agent on the same SQLite file, as another process would build it) ends the
run, which the caller's ``GetTask`` then reads. Pinned here; documented in interop.md.

Real parts: uvicorn on 127.0.0.1, the official a2a-sdk client, a SQLite store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from a2a.client import A2AClientError
from a2a.types import a2a_pb2 as pb

from agentloop import Agent, Approve, tool
from agentloop.a2a import A2AApp
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

from ._serve import client, send, serving, user

PURGED: list[str] = []


@tool(requires_approval=True)
def purge_queue(queue: str) -> str:
    """Irreversibly delete every message on a queue."""
    PURGED.append(queue)
    return f"purged {queue}"


def operators_decide(request: Any, message: pb.Message) -> None:
    if any(part.HasField("data") for part in message.parts):
        raise PermissionError("an on-call operator decides this agent's approvals")


async def test_the_callers_decision_is_refused_and_the_operator_decides(tmp_path: Path) -> None:
    PURGED.clear()
    db = tmp_path / "ops.db"
    model = ScriptedModel([call("purge_queue", {"queue": "orders"}, id="c1"), reply("Purged.")])
    agent = Agent(model, tools=[purge_queue], store=SQLiteStore(db))
    app = A2AApp(agent, name="ops", deps=operators_decide)
    async with serving(app) as url, client(url) as caller:
        (first,) = await send(caller, user("purge orders"))
        task = first.task
        assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
        approve = user(
            context_id=task.context_id, task_id=task.id, data={"decisions": {"c1": "approve"}}
        )
        for _ in range(2):  # refused twice: the first refusal left nothing held
            with pytest.raises(A2AClientError, match="403"):
                await send(caller, approve)
        read = await caller.get_task(pb.GetTaskRequest(id=task.id))
        assert read.status.state == pb.TASK_STATE_INPUT_REQUIRED and PURGED == []

        operator = Agent(
            ScriptedModel([reply("Purged.")]), tools=[purge_queue], store=SQLiteStore(db)
        )
        run = await operator.session(task.context_id).continue_run(decisions={"c1": Approve()})
        assert run.id == task.id and run.output == "Purged." and PURGED == ["orders"]

        read = await caller.get_task(pb.GetTaskRequest(id=task.id))
        assert read.status.state == pb.TASK_STATE_COMPLETED
        assert read.artifacts[0].parts[0].text == "Purged."
