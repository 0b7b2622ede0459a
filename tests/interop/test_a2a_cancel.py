"""A2A ``CancelTask`` through ``cancel_run`` (SPEC 17, 25, 26): official client, real HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotCancelableError

from agentloop import Agent, RunConfig, tool
from agentloop.batch import poll
from agentloop.providers.openai import OpenAIClient
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, ScriptedModel, call, reply

from ._serve import client, send, serving, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

RAN: list[str] = []


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    RAN.append(path)
    return f"deleted {path}"


async def test_a_paused_task_cancelled_twice_then_its_context_runs_again(tmp_path: Path) -> None:
    RAN.clear()
    model = ScriptedModel([call("delete", {"path": "a"}, id="c1"), reply("fresh")])
    agent = Agent(model, tools=[delete], store=SQLiteStore(tmp_path / "s.db"))
    app = agent.to_a2a(name="a")
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("go"))
        assert paused.task.status.state == pb.TASK_STATE_INPUT_REQUIRED
        done = await made.cancel_task(pb.CancelTaskRequest(id=paused.task.id))
        assert done.status.state == pb.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):  # cancelling twice: the task has ended
            await made.cancel_task(pb.CancelTaskRequest(id=paused.task.id))
        got = await made.get_task(pb.GetTaskRequest(id=paused.task.id))
        assert got.status.state == pb.TASK_STATE_CANCELED
        [again] = await send(made, user("another", context_id=done.context_id))
        assert again.task.status.state == pb.TASK_STATE_COMPLETED
    assert RAN == []
    session = app.handler._minted[done.context_id]
    first, second = session.runs
    assert first.stop_reason is not None and first.stop_reason.is_cancelled()
    assert second.output == "fresh"
    stored = SQLiteStore(tmp_path / "s.db").load_run(first.id)
    assert stored is not None and stored.run.stop_reason is not None
    assert stored.run.stop_reason.is_cancelled() and not stored.run.paused


async def test_a_task_waiting_in_a_provider_batch_is_cancelled(tmp_path: Path) -> None:
    async with FakeProviderServer([FakeReply("late")]) as server:
        http = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        store = SQLiteStore(tmp_path / "s.db")
        agent = Agent(http, store=store, config=RunConfig(batch=True))
        app = agent.to_a2a(name="a")
        async with serving(app) as url, client(url) as made:
            [working] = await send(made, user("go"))
            assert working.task.status.state == pb.TASK_STATE_WORKING
            done = await made.cancel_task(pb.CancelTaskRequest(id=working.task.id))
            assert done.status.state == pb.TASK_STATE_CANCELED
            report = await poll(agent)
            assert report == type(report)()  # its result is never applied
            got = await made.get_task(pb.GetTaskRequest(id=working.task.id))
            assert got.status.state == pb.TASK_STATE_CANCELED
