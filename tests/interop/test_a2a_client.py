"""RemoteA2AAgent against real A2A servers (our A2AApp over uvicorn, and a second process)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

import agentloop
from agentloop import Agent, CancelToken, tool
from agentloop.a2a import A2AApp, RemoteA2AAgent
from agentloop.errors import AuthError, Cancelled, ConfigurationError, RemoteAuthError
from agentloop.messages import ToolResultPart
from agentloop.testing import ScriptedModel, call, reply

from ._serve import client, send, serving, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def results(run: Any) -> list[ToolResultPart]:
    return [r for turn in run.turns for r in turn.tool_results]


def parent(remote: RemoteA2AAgent, name: str = "helper") -> Agent[Any]:
    model = ScriptedModel([call(name, {"input": "please"}), reply("thanks")])
    return Agent(model, tools=[remote])


async def ask(remote: RemoteA2AAgent, name: str = "helper") -> Any:
    """One run of a parent agent that calls ``remote`` once; its HTTP client closed after."""
    async with parent(remote, name) as agent:
        return await agent.run("go")


async def test_a_remote_agent_is_one_tool_named_by_its_card() -> None:
    remote_agent = Agent(ScriptedModel([reply("from afar")]))
    app = A2AApp(remote_agent, name="far away", description="lives elsewhere")
    async with serving(app) as url:
        remote = RemoteA2AAgent(url)
        agent = parent(remote, "far_away")
        run = await agent.run("go")
        listed = agent.registry.get("far_away")
        await agent.aclose()
    [result] = results(run)
    assert (result.name, result.content, result.is_error) == ("far_away", "from afar", False)
    assert listed is not None and listed.description == "lives elsewhere"
    assert run.output == "thanks"


async def test_an_unreachable_card_is_a_configuration_error_naming_the_url() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    agent = parent(RemoteA2AAgent(f"http://127.0.0.1:{port}", name="helper"))
    with pytest.raises(ConfigurationError, match=f"127.0.0.1:{port}"):
        await agent.run("go")


async def test_remote_failures_are_soft_in_the_words_of_spec_3() -> None:
    failing = Agent(ScriptedModel([AuthError("bad key")]))

    @tool(requires_approval=True)
    def drop(table: str) -> str:
        """Drop a table."""
        return "dropped"

    asking = Agent(ScriptedModel([call("drop", {"table": "t"})]), tools=[drop])
    asking_app = A2AApp(asking, name="asker")

    def broken(request: Any, context_id: str) -> Any:
        raise ValueError("db down")

    erroring = A2AApp(Agent(ScriptedModel([])), name="e", session=broken)
    async with serving(failing.to_a2a(name="f")) as url:
        run = await ask(RemoteA2AAgent(url, name="helper"))
    assert results(run)[0].content == "agent 'helper' stopped: failed: AuthError: bad key"
    assert results(run)[0].is_error
    async with serving(asking_app) as url:
        run = await ask(RemoteA2AAgent(url, name="helper"))
        [record] = asking_app.handler._tasks.values()
    assert results(run)[0].content == "agent 'helper' stopped: input_required: "
    assert record.state == pb.TASK_STATE_CANCELED  # the paused remote task was cancelled
    async with serving(erroring) as url:
        run = await ask(RemoteA2AAgent(url, name="helper"))
    assert results(run)[0].content == (
        "agent 'helper' stopped: error -32603: the application's session= callable failed "
        "(ValueError)"
    )


async def test_a_refused_credential_is_the_hard_remote_auth_error() -> None:
    def gate(request: Any, context_id: str) -> Any:
        if request.headers.get("authorization") != "Bearer right":
            raise PermissionError("who are you")
        return app.agent.session(context_id)

    app = A2AApp(Agent(ScriptedModel([reply("in")])), name="vault", session=gate)
    async with serving(app) as url:
        good = RemoteA2AAgent(url, name="helper", headers={"Authorization": "Bearer right"})
        assert results(await ask(good))[0].content == "in"
        bad = parent(RemoteA2AAgent(url, name="helper", headers={"Authorization": "Bearer wrong"}))
        with pytest.raises(RemoteAuthError) as refused:
            await bad.run("go")
        await bad.aclose()
    assert (refused.value.agent, refused.value.status) == ("helper", 403)
    assert str(refused.value) == "remote agent 'helper' refused our credentials (HTTP 403)"
    assert bad.runs[-1].stop_reason is refused.value


class Cut:
    """An ASGI wrapper that cuts each streamed response after its first chunk (the run goes on)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.inner: list[asyncio.Task[None]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        first = asyncio.Event()
        streaming = False

        async def sending(message: Any) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start":
                streaming = any(
                    k == b"content-type" and v.startswith(b"text/event-stream")
                    for k, v in message["headers"]
                )
            if streaming and first.is_set():
                return
            await send(message)
            if streaming and message["type"] == "http.response.body" and message.get("body"):
                first.set()

        task = asyncio.create_task(self.app(scope, receive, sending))
        self.inner.append(task)
        cut = asyncio.create_task(first.wait())
        done, _ = await asyncio.wait([task, cut], return_when=asyncio.FIRST_COMPLETED)
        cut.cancel()
        if task in done:
            return
        raise ConnectionResetError("cut")  # uvicorn drops the connection


async def test_a_cut_stream_is_checked_with_get_task() -> None:
    release = asyncio.Event()

    @tool
    async def slow() -> str:
        """Take a while."""
        await release.wait()
        return "done"

    quick = Cut(Agent(ScriptedModel([reply("quick answer")])).to_a2a(name="q"))
    stuck_app = Agent(ScriptedModel([call("slow", {}), reply("late")]), tools=[slow]).to_a2a(
        name="s"
    )
    async with serving(quick) as url:
        run = await ask(RemoteA2AAgent(url, name="helper"))
    assert results(run)[0].content == "quick answer"  # GetTask found it completed
    async with serving(Cut(stuck_app)) as url:
        run = await ask(RemoteA2AAgent(url, name="helper"))
        release.set()
    result = results(run)[0]
    assert result.is_error and result.content.startswith("agent 'helper' is unavailable: ")


async def test_a_parent_cancel_and_the_tool_timeout_cancel_the_remote_task() -> None:
    started = asyncio.Event()

    @tool
    async def forever() -> str:
        """Never ends."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    remote_agent = Agent(ScriptedModel([call("forever", {})] * 2), tools=[forever])
    app = remote_agent.to_a2a(name="r")
    async with serving(app) as url:
        cancel = CancelToken()
        agent = parent(RemoteA2AAgent(url, name="helper"))
        running = asyncio.create_task(agent.run("go", cancel=cancel))
        await started.wait()
        cancel.cancel()
        with pytest.raises(Cancelled):
            await running
        await agent.aclose()
        [first] = app.handler._tasks.values()
        await asyncio.wait_for(first.settled.wait(), 5)
        assert first.state == pb.TASK_STATE_CANCELED
        started.clear()
        run = await ask(RemoteA2AAgent(url, name="helper", timeout=0.3))
        assert results(run)[0].content == "Tool 'helper' timed out after 0s"
        second = next(t for t in app.handler._tasks.values() if t is not first)
        await asyncio.wait_for(second.settled.wait(), 5)
        assert second.state == pb.TASK_STATE_CANCELED


@contextlib.asynccontextmanager
async def other_process() -> AsyncIterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    script = Path(__file__).with_name("remote_app.py")
    source = str(Path(agentloop.__file__).parents[1])  # this checkout's agentloop
    env = {**os.environ, "PYTHONPATH": source}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(port), stdout=subprocess.DEVNULL, env=env
    )
    try:
        for _ in range(500):
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        await process.wait()


async def test_a_round_trip_between_two_processes_where_the_remote_pauses_and_is_decided() -> None:
    async with other_process() as url, client(url) as made:
        [paused] = await send(made, user("clean up"))
        task = paused.task
        assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
        pending = json_format.MessageToDict(task.status.message.parts[0].data)["pending"]
        assert [(p["id"], p["name"]) for p in pending] == [("c1", "delete")]
        decided = user(
            task_id=task.id, context_id=task.context_id, data={"decisions": {"c1": "approve"}}
        )
        [done] = await send(made, decided)
        assert done.task.id == task.id
        assert done.task.status.state == pb.TASK_STATE_COMPLETED
        assert done.task.artifacts[0].parts[0].text == "old.log is gone"
        caller = parent(RemoteA2AAgent(url), "janitor")
        run = await caller.run("say hello")
        await caller.aclose()
    assert results(run)[0].content == "hello from the other process"
