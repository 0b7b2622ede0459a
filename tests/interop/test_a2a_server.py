"""A2AApp against the official a2a-sdk client and card resolver, over uvicorn on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pydantic
import pytest
from a2a.client import A2ACardResolver, A2AClientError
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from google.protobuf import json_format

from agentloop import Agent, ToolContext, tool
from agentloop.a2a import A2AApp
from agentloop.errors import AuthError
from agentloop.guardrails import InputGuardrail
from agentloop.testing import ScriptedModel, call, reply

from ._serve import client, send, serving, user

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    delete.calls.append(path)  # type: ignore[attr-defined]
    return f"deleted {path}"


def data(message: pb.Message) -> Any:
    return json_format.MessageToDict(message.parts[0].data)


async def test_the_card_names_the_agent_and_one_jsonrpc_interface_at_the_base_url() -> None:
    agent = Agent(ScriptedModel([]))
    async with serving(A2AApp(agent, name="helper", description="helps")) as url:
        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, url).get_agent_card()
    assert (card.name, card.description) == ("helper", "helps")
    assert card.capabilities.streaming
    [interface] = card.supported_interfaces
    assert (interface.protocol_binding, interface.protocol_version) == ("JSONRPC", "1.0")
    assert interface.url.rstrip("/") == url
    explicit = A2AApp(agent, name="h", url="https://agents.example/h").card("http://x/")
    assert explicit.supported_interfaces[0].url == "https://agents.example/h"
    assert agent.to_a2a(name="h").name == "h"


async def test_a_message_completes_and_its_context_continues_the_conversation() -> None:
    model = ScriptedModel([reply("hello"), reply("again")])
    async with serving(Agent(model).to_a2a(name="a")) as url, client(url) as made:
        [first] = await send(made, user("hi"))
        assert first.task.status.state == pb.TASK_STATE_COMPLETED
        [artifact] = first.task.artifacts
        assert (artifact.name, artifact.parts[0].text) == ("output", "hello")
        [second] = await send(made, user("more", context_id=first.task.context_id))
    assert second.task.context_id == first.task.context_id
    assert second.task.id != first.task.id
    assert second.task.artifacts[0].parts[0].text == "again"
    texts = [m.text for m in model.requests[1].messages if m.role == "user"]
    assert texts == ["hi", "more"]


async def test_an_id_the_app_did_not_mint_is_never_confirmed() -> None:
    async with serving(Agent(ScriptedModel([reply("x")])).to_a2a(name="a")) as url:
        async with client(url) as made:
            with pytest.raises(TaskNotFoundError):
                await send(made, user("hi", context_id="someone-elses"))
            with pytest.raises(TaskNotFoundError):
                await made.get_task(pb.GetTaskRequest(id="someone-elses"))
            with pytest.raises(TaskNotFoundError):
                await made.cancel_task(pb.CancelTaskRequest(id="someone-elses"))
            [done] = await send(made, user("hi"))
            with pytest.raises(TaskNotFoundError):  # a task id under another context
                await send(made, user("x", task_id=done.task.id, context_id="other"))


async def test_the_session_callable_picks_refuses_and_fails_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = Agent(ScriptedModel([reply("one"), reply("two")]))
    owned: dict[str, Any] = {}

    def pick(request: Any, context_id: str) -> Any:
        who = request.headers.get("x-user")
        if who == "mallory":
            raise PermissionError("not you")
        if who == "broken":
            raise RuntimeError(f"db down, key {KEY}")
        if who == "confused":
            return "not a session"
        if context_id in owned and owned[context_id][0] != who:
            raise LookupError(context_id)
        owned.setdefault(context_id, (who, agent.session(context_id)))
        return owned[context_id][1]

    async with serving(A2AApp(agent, name="a", session=pick)) as url:
        async with client(url) as made:
            made._transport.httpx_client.headers["x-user"] = "alice"  # type: ignore[attr-defined]
            [mine] = await send(made, user("hi"))
            assert mine.task.status.state == pb.TASK_STATE_COMPLETED
            made._transport.httpx_client.headers["x-user"] = "bob"  # type: ignore[attr-defined]
            with pytest.raises(TaskNotFoundError):
                await send(made, user("hi", context_id=mine.task.context_id))
            with pytest.raises(TaskNotFoundError):
                await made.get_task(pb.GetTaskRequest(id=mine.task.id))
            made._transport.httpx_client.headers["x-user"] = "mallory"  # type: ignore[attr-defined]
            with pytest.raises(A2AClientError, match="403"):
                await send(made, user("hi"))
            made._transport.httpx_client.headers["x-user"] = "broken"  # type: ignore[attr-defined]
            with (
                caplog.at_level(logging.ERROR, logger="agentloop"),
                pytest.raises(InternalError) as failed,
            ):
                await send(made, user("hi"))
            made._transport.httpx_client.headers["x-user"] = "confused"  # type: ignore[attr-defined]
            with (
                caplog.at_level(logging.ERROR, logger="agentloop"),
                pytest.raises(InternalError, match="returned str, not a Session"),
            ):
                await send(made, user("hi"))
    assert KEY not in str(failed.value) and "session=" in str(failed.value)
    logged = [r for r in caplog.records if r.name == "agentloop"]
    assert len(logged) == 2 and KEY not in logged[0].getMessage()


async def test_deps_reach_the_tools_and_a_raising_deps_is_internal() -> None:
    seen: list[Any] = []

    @tool
    def whoami(ctx: ToolContext[Any]) -> str:
        """Who asks."""
        seen.append(ctx.deps)
        return "ok"

    def deps(request: Any, message: pb.Message) -> Any:
        if message.parts[0].text == "boom":
            raise ValueError("no")
        return {"user": request.headers.get("x-user")}

    model = ScriptedModel([call("whoami", {}), reply("done")])
    app = A2AApp(Agent(model, tools=[whoami]), name="a", deps=deps)
    async with serving(app) as url, client(url) as made:
        made._transport.httpx_client.headers["x-user"] = "ann"  # type: ignore[attr-defined]
        [done] = await send(made, user("hi"))
        with pytest.raises(InternalError, match="deps="):
            await send(made, user("boom"))
    assert done.task.status.state == pb.TASK_STATE_COMPLETED and seen == [{"user": "ann"}]


async def test_a_pause_is_input_required_and_decisions_continue_the_same_run_once() -> None:
    delete.calls = []  # type: ignore[attr-defined]
    model = ScriptedModel([call("delete", {"path": "a.txt"}, id="c1"), reply("deleted")])
    app = Agent(model, tools=[delete]).to_a2a(name="a")
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("delete a.txt"))
        task = paused.task
        assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
        assert data(task.status.message) == {
            "pending": [
                {
                    "id": "c1",
                    "name": "delete",
                    "arguments": {"path": "a.txt"},
                    "kind": "approval",
                    "message": None,
                }
            ]
        }
        ids = {"task_id": task.id, "context_id": task.context_id}
        with pytest.raises(InvalidParamsError, match="c1"):  # no decisions
            await send(made, user("go on", **ids))
        with pytest.raises(InvalidParamsError, match="c1"):  # a bad one
            await send(made, user(**ids, data={"decisions": {"c1": "maybe"}}))
        with pytest.raises(InvalidParamsError, match="c1"):  # one for another call
            await send(made, user(**ids, data={"decisions": {"c9": "approve"}}))
        assert delete.calls == []  # type: ignore[attr-defined]
        [done] = await send(made, user(**ids, data={"decisions": {"c1": "approve"}}))
        runs = app.handler._minted[task.context_id].runs
        assert done.task.id == task.id == runs[-1].id
        assert done.task.status.state == pb.TASK_STATE_COMPLETED
        with pytest.raises(InvalidParamsError, match="completed"):  # a terminal task
            await send(made, user(**ids, data={"decisions": {"c1": "approve"}}))
    assert delete.calls == ["a.txt"]  # type: ignore[attr-defined]
    assert len(runs) == 1


async def test_two_follow_ups_at_once_run_the_decided_call_once() -> None:
    delete.calls = []  # type: ignore[attr-defined]
    model = ScriptedModel([call("delete", {"path": "b"}, id="c1"), reply("ok")])
    async with serving(Agent(model, tools=[delete]).to_a2a(name="a")) as url, client(url) as made:
        [paused] = await send(made, user("go"))
        ids = {"task_id": paused.task.id, "context_id": paused.task.context_id}
        follow = user(**ids, data={"decisions": {"c1": {"edit": {"path": "c"}}}})
        results = await asyncio.gather(
            send(made, follow), send(made, follow), return_exceptions=True
        )
    assert sorted(type(r).__name__ for r in results) == ["InvalidParamsError", "list"]
    assert delete.calls == ["c"]  # type: ignore[attr-defined]


async def test_hard_errors_fail_redacted_and_an_input_guardrail_rejects() -> None:
    failing = Agent(ScriptedModel([AuthError(f"bad key {KEY} in /home/me/.env")]))
    guarded = Agent(
        ScriptedModel([reply("never")]),
        guardrails=[InputGuardrail(lambda ctx, text: "no secrets" if "secret" in text else None)],
    )
    async with serving(failing.to_a2a(name="a")) as url, client(url) as made:
        [failed] = await send(made, user("hi"))
    status = failed.task.status
    assert status.state == pb.TASK_STATE_FAILED
    text = status.message.parts[0].text
    assert text.startswith("AuthError: bad key ") and KEY not in text
    assert "Traceback" not in text
    async with serving(guarded.to_a2a(name="g")) as url, client(url) as made:
        [rejected] = await send(made, user("a secret"))
    assert rejected.task.status.state == pb.TASK_STATE_REJECTED
    assert rejected.task.status.message.parts[0].text.startswith("GuardrailTripped: ")


class Answer(pydantic.BaseModel):
    city: str
    temperature: int


async def test_streaming_sends_the_task_its_deltas_and_the_final_status() -> None:
    model = ScriptedModel([reply("Hello, world")])
    typed = Agent(
        ScriptedModel([call("final_result", {"city": "Oslo", "temperature": 3})]),
        output_type=Answer,
    )
    async with serving(Agent(model).to_a2a(name="a")) as url, client(url, streaming=True) as made:
        items = await send(made, user("hi"))
    assert items[0].HasField("task") and items[0].task.status.state == pb.TASK_STATE_WORKING
    deltas = [i.artifact_update for i in items if i.HasField("artifact_update")]
    assert deltas and all(d.append and d.artifact.artifact_id == "output" for d in deltas)
    assert "".join(d.artifact.parts[0].text for d in deltas) == "Hello, world"
    assert items[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
    async with serving(typed.to_a2a(name="t")) as url, client(url) as made:
        [done] = await send(made, user("weather?"))
    assert json_format.MessageToDict(done.task.artifacts[0].parts[0].data) == {
        "city": "Oslo",
        "temperature": 3,
    }


async def test_a_dropped_stream_does_not_cancel_and_cancel_task_does() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    cancelled: list[bool] = []

    @tool
    async def wait() -> str:
        """Wait."""
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "released"

    model = ScriptedModel([call("wait", {}), reply("one"), call("wait", {}), reply("two")])
    app = Agent(model, tools=[wait]).to_a2a(name="a")
    async with serving(app) as url:
        async with client(url, streaming=True) as made:
            stream: Any = made.send_message(user("go"))
            first = await anext(stream)
            await stream.aclose()  # the client goes away
        await started.wait()
        release.set()
        async with client(url) as made:
            for _ in range(200):
                got = await made.get_task(pb.GetTaskRequest(id=first.task.id))
                if got.status.state == pb.TASK_STATE_COMPLETED:
                    break
                await asyncio.sleep(0.01)
            assert got.status.state == pb.TASK_STATE_COMPLETED
            with pytest.raises(TaskNotCancelableError):
                await made.cancel_task(pb.CancelTaskRequest(id=first.task.id))
            started.clear()
            release.clear()
            request = user("again", context_id=first.task.context_id)
            request.configuration.return_immediately = True
            [working] = await send(made, request)
            await started.wait()
            done = await made.cancel_task(pb.CancelTaskRequest(id=working.task.id))
    assert done.status.state == pb.TASK_STATE_CANCELED
    last = app.handler._minted[working.task.context_id].runs[-1]
    assert cancelled == [True] and last.stop_reason is not None
    assert last.stop_reason.is_cancelled()


async def test_cancel_task_on_a_paused_task_cancels_its_run() -> None:
    delete.calls = []  # type: ignore[attr-defined]
    agent = Agent(ScriptedModel([call("delete", {"path": "a"}, id="c1")]), tools=[delete])
    app = agent.to_a2a(name="a")
    async with serving(app) as url, client(url) as made:
        [paused] = await send(made, user("go"))
        done = await made.cancel_task(pb.CancelTaskRequest(id=paused.task.id))
        with pytest.raises(InvalidParamsError):
            await send(made, user(task_id=done.id, data={"decisions": {"c1": "approve"}}))
    assert done.status.state == pb.TASK_STATE_CANCELED
    last = app.handler._minted[done.context_id].runs[-1]
    assert delete.calls == [] and last.stop_reason is not None  # type: ignore[attr-defined]
    assert last.stop_reason.is_cancelled() and not last.paused


async def rpc(url: str, body: bytes | str, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(
            url + "/",
            content=body,
            headers={"content-type": "application/json", "a2a-version": "1.0", **headers},
        )


async def test_hostile_bodies_get_the_protocols_errors_never_a_traceback() -> None:
    app = A2AApp(Agent(ScriptedModel([])), name="a", max_body_bytes=10_000)
    async with serving(app) as url:
        cases: dict[int, list[bytes | str]] = {
            -32700: [b"{not json", "[" * 5000 + "]" * 5000, b'{"a": NaN}'],
            -32600: [b'{"jsonrpc": "1.0", "id": 1, "method": "SendMessage"}', b"[]", b"3"],
            -32602: [b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", '
                     b'"params": {"message": 3}}'],
            -32601: [b'{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}',
                     b'{"jsonrpc": "2.0", "id": 1, "method": "Nope", "params": {}}'],
        }  # fmt: skip
        for code, bodies in cases.items():
            for body in bodies:
                response = await rpc(url, body)
                assert response.status_code == 200, body
                assert response.json()["error"]["code"] == code, (body, response.text)
                assert "Traceback" not in response.text
        big = await rpc(url, b'{"x": "' + b"a" * 20_000 + b'"}')
        assert big.status_code == 413


async def test_a_waiting_batch_run_is_working(tmp_path: Any) -> None:
    from agentloop import RunConfig
    from agentloop.providers.openai import OpenAIClient
    from agentloop.store import SQLiteStore
    from agentloop.testing import FakeProviderServer, FakeReply

    async with FakeProviderServer(default=FakeReply("x"), batch_after=3600) as server:
        model = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        store = SQLiteStore(tmp_path / "s.db")
        agent = Agent(model, store=store, config=RunConfig(batch=True))
        async with serving(agent.to_a2a(name="a")) as url, client(url) as made:
            [first] = await send(made, user("hi"))
            assert first.task.status.state == pb.TASK_STATE_WORKING
            from agentloop.batch import poll

            assert (await poll(agent)).waiting == [first.task.id]
            for batch in server.batches.batches.values():
                object.__setattr__(batch, "ready_at", 0.0)
            assert (await poll(agent)).continued == [first.task.id]
            done = await made.get_task(pb.GetTaskRequest(id=first.task.id))
    assert done.status.state == pb.TASK_STATE_COMPLETED
    assert [p.text for p in done.artifacts[0].parts] == ["x"]


async def test_a_batch_run_that_pauses_after_a_poll_takes_decisions_then_completes(
    tmp_path: Any,
) -> None:
    from agentloop import RunConfig
    from agentloop.batch import poll
    from agentloop.providers.openai import OpenAIClient
    from agentloop.store import SQLiteStore
    from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall

    delete.calls = []  # type: ignore[attr-defined]
    steps = [FakeReply(tool_calls=[FakeToolCall("delete", {"path": "a.txt"})]), FakeReply("gone")]

    def ready(server: FakeProviderServer) -> None:
        for batch in server.batches.batches.values():
            object.__setattr__(batch, "ready_at", 0.0)

    async with FakeProviderServer(steps, batch_after=3600) as server:
        model = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        store = SQLiteStore(tmp_path / "s.db")
        agent = Agent(model, tools=[delete], store=store, config=RunConfig(batch=True))
        async with serving(agent.to_a2a(name="a")) as url, client(url) as made:
            [first] = await send(made, user("delete a.txt"))
            ready(server)
            assert (await poll(agent)).paused == [first.task.id]
            paused = await made.get_task(pb.GetTaskRequest(id=first.task.id))
            assert paused.status.state == pb.TASK_STATE_INPUT_REQUIRED
            [pending] = data(paused.status.message)["pending"]
            ids = {"task_id": paused.id, "context_id": paused.context_id}
            [going] = await send(made, user(**ids, data={"decisions": {pending["id"]: "approve"}}))
            assert going.task.status.state == pb.TASK_STATE_WORKING  # its next turn: a batch
            ready(server)
            assert (await poll(agent)).continued == [first.task.id]
            done = await made.get_task(pb.GetTaskRequest(id=first.task.id))
    assert done.status.state == pb.TASK_STATE_COMPLETED
    assert [p.text for p in done.artifacts[0].parts] == ["gone"]
    assert delete.calls == ["a.txt"]  # type: ignore[attr-defined]


async def test_a_batch_run_that_a_poll_fails_is_failed(tmp_path: Any) -> None:
    from dataclasses import replace

    from agentloop import RunConfig
    from agentloop.batch import poll
    from agentloop.providers.openai import OpenAIClient
    from agentloop.store import SQLiteStore
    from agentloop.testing import FakeProviderServer, Fault

    refused = replace(Fault.http(400), batch_result="errored")
    async with FakeProviderServer([refused]) as server:
        model = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
        agent = Agent(model, store=SQLiteStore(tmp_path / "s.db"), config=RunConfig(batch=True))
        async with serving(agent.to_a2a(name="a")) as url, client(url) as made:
            [first] = await send(made, user("hi"))
            assert first.task.status.state == pb.TASK_STATE_WORKING
            assert list((await poll(agent)).failed) == [first.task.id]
            failed = await made.get_task(pb.GetTaskRequest(id=first.task.id))
    assert failed.status.state == pb.TASK_STATE_FAILED
    assert failed.status.message.parts[0].text.startswith("BadRequestError: ")
