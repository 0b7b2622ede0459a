"""AGUIApp against real parts: uvicorn on 127.0.0.1, the fake OpenAI-compatible server, the
``ag-ui-validate`` conformance validator over every recorded stream, and ``@ag-ui/client`` in node.

Each case records the bytes the server sent (an ASGI tap, so even an aborted stream is
recorded whole) and runs the validator's command line over them: a tool turn, a soft error,
reasoning, a pending approval decided by a second request, a hard error, an abort.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import uvicorn

from agentloop import Agent, Approve, tool
from agentloop.errors import Cancelled, ToolError
from agentloop.providers import OpenAIClient
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall, Fault, ScriptedModel
from agentloop.testing import call as scripted_call
from agentloop.ui.ag_ui import AGUIApp

NODE_DIR = Path(__file__).parent / "node"
VALIDATE = shutil.which("ag-ui-validate") or str(Path(sys.executable).parent / "ag-ui-validate")


# -- the harness ---------------------------------------------------------------------------------


class Tap:
    """An ASGI wrapper that keeps every byte each response sent, and says when it ended."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.bodies: list[bytes] = []
        self.done: list[asyncio.Event] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks: list[bytes] = []
        finished = asyncio.Event()
        self.done.append(finished)

        async def tapped(message: Any) -> None:
            if message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, tapped)
        finally:
            self.bodies.append(b"".join(chunks))
            finished.set()


class Served:
    def __init__(self, url: str, tap: Tap) -> None:
        self.url = url
        self.tap = tap


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[Served]:
    """A real uvicorn server for ``app`` on a free port of 127.0.0.1."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    tap = Tap(app)
    config = uvicorn.Config(
        tap, lifespan="off", log_level="warning", timeout_graceful_shutdown=2, access_log=False
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield Served(f"http://127.0.0.1:{port}/", tap)
    finally:
        server.should_exit = True
        await task
        sock.close()


def sse_events(body: bytes) -> list[dict[str, Any]]:
    """The JSON events of an SSE body (``data:`` lines)."""
    return [
        json.loads(line[len("data: ") :])
        for line in body.decode().splitlines()
        if line.startswith("data: ")
    ]


async def post(url: str, payload: Any) -> tuple[int, list[dict[str, Any]] | Any]:
    async with aiohttp.ClientSession() as http, http.post(url, json=payload) as response:
        body = await response.read()
        if response.content_type == "text/event-stream":
            return response.status, sse_events(body)
        return response.status, json.loads(body)


def run_input(text: str, thread: str = "t1", run: str = "r1", **more: Any) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [{"id": f"u-{run}", "role": "user", "content": text}],
        **more,
    }


def resumed(
    first: list[dict[str, Any]], answers: dict[str, Any], run: str, said: str = "delete a.txt"
) -> dict[str, Any]:
    """The next request as a client sends it: its history (the interrupted call) and answers."""
    start = next(e for e in first if e["type"] == "TOOL_CALL_START")
    arguments = "".join(e["delta"] for e in first if e["type"] == "TOOL_CALL_ARGS")
    call = {"id": start["toolCallId"], "type": "function"}
    call["function"] = {"name": start["toolCallName"], "arguments": arguments}
    messages = [
        {"id": "u-r1", "role": "user", "content": said},
        {"id": start["parentMessageId"], "role": "assistant", "toolCalls": [call]},
    ]
    resume = [{"interruptId": k, "status": "resolved", "payload": v} for k, v in answers.items()]
    return {"threadId": "t1", "runId": run, "messages": messages, "resume": resume}


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def validate(body: bytes, tmp_path: Path, name: str) -> dict[str, Any]:
    """Run the ag-ui-validate CLI over a recorded SSE stream; fail on any error finding."""
    capture = tmp_path / f"{name}.sse"
    capture.write_bytes(body)
    done = subprocess.run(
        [VALIDATE, str(capture), "--json"], capture_output=True, text=True, timeout=60
    )
    report: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == 0, json.dumps(report["diagnostics"], indent=1)
    return report


def fake_agent(server: FakeProviderServer, **kwargs: Any) -> Agent[Any]:
    client = OpenAIClient("fake-model", api_key="k", base_url=server.base_url)
    return Agent(client, **kwargs)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    raise ToolError(f"no entry for {key}")


# -- the cases -----------------------------------------------------------------------------------


async def test_a_tool_turn_streams_the_call_its_arguments_and_its_result(tmp_path: Path) -> None:
    script = [
        FakeReply(tool_calls=[FakeToolCall("add", {"a": 2, "b": 3}, id="call_add")]),
        FakeReply("2 + 3 = 5"),
    ]
    async with FakeProviderServer(script) as provider:
        app = AGUIApp(fake_agent(provider, tools=[add]))
        async with serving(app) as served:
            status, events = await post(served.url, run_input("add 2 and 3"))
    assert status == 200
    kinds = types(events)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    start = kinds.index("TOOL_CALL_START")
    assert kinds[start : start + 2] == ["TOOL_CALL_START", "TOOL_CALL_ARGS"]
    assert kinds.index("TOOL_CALL_END") < kinds.index("TOOL_CALL_RESULT")
    arguments = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(arguments) == {"a": 2, "b": 3}
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "call_add" and result["content"] == "5"
    assert "metadata" not in result
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "2 + 3 = 5"
    assert events[-1]["outcome"] == {"type": "success"}
    assert events[-1]["result"] == "2 + 3 = 5"
    assert events[0]["threadId"] == "t1" and events[-1]["runId"] == "r1"
    validate(served.tap.bodies[0], tmp_path, "tool_turn")


async def test_a_soft_error_is_a_result_marked_as_an_error(tmp_path: Path) -> None:
    script = [
        FakeReply(tool_calls=[FakeToolCall("lookup", {"key": "x"}, id="call_1")]),
        FakeReply("there is no x"),
    ]
    async with FakeProviderServer(script) as provider:
        app = AGUIApp(fake_agent(provider, tools=[lookup]))
        async with serving(app) as served:
            _, events = await post(served.url, run_input("look x up"))
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["metadata"] == {"agentloop": {"error": True}}
    assert "no entry for x" in result["content"]
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"]["type"] == "success"
    validate(served.tap.bodies[0], tmp_path, "soft_error")


async def test_reasoning_streams_as_reasoning_events(tmp_path: Path) -> None:
    async with FakeProviderServer([FakeReply("42", thinking="six times seven")]) as provider:
        async with serving(AGUIApp(fake_agent(provider))) as served:
            _, events = await post(served.url, run_input("the answer?"))
    kinds = types(events)
    order = [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
    ]
    assert [k for k in kinds if k in order and k != "REASONING_MESSAGE_CONTENT"] == [
        k for k in order if k != "REASONING_MESSAGE_CONTENT"
    ]
    thought = "".join(e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT")
    assert thought == "six times seven"
    validate(served.tap.bodies[0], tmp_path, "reasoning")


async def test_a_hard_error_is_run_error_with_class_phase_and_request_sent(tmp_path: Path) -> None:
    async with FakeProviderServer([Fault.auth()]) as provider:
        async with serving(AGUIApp(fake_agent(provider))) as served:
            status, events = await post(served.url, run_input("hello"))
    assert status == 200
    assert types(events)[-1] == "RUN_ERROR"
    error = events[-1]
    assert error["code"] == "AuthError"
    facts = error["metadata"]["agentloop"]
    assert facts["error"] == "AuthError"
    assert facts["phase"] == "status" and facts["request_sent"] is True
    assert facts["status_code"] == 401 and facts["recoverable"] is False
    assert "Incorrect API key" in error["message"]
    validate(served.tap.bodies[0], tmp_path, "hard_error")


async def test_a_client_that_disconnects_cancels_the_run(tmp_path: Path) -> None:
    started = asyncio.Event()
    never = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait for something that never happens."""
        started.set()
        await never.wait()
        return "unreachable"

    agent = Agent(ScriptedModel([scripted_call("wait"), "never read"]), tools=[wait])
    app = AGUIApp(agent)
    async with serving(app) as served:
        async with aiohttp.ClientSession() as http:
            response = await http.post(served.url, json=run_input("wait"))
            await started.wait()
            response.close()  # the client goes away mid-run
        await served.tap.done[0].wait()
    [session] = app.sessions._sessions.values()
    run = session.current_run
    assert run is not None and isinstance(run.stop_reason, Cancelled)
    events = sse_events(served.tap.bodies[0])
    assert types(events)[-1] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "cancelled"}
    validate(served.tap.bodies[0], tmp_path, "abort")


def approval_agent(ran: list[dict[str, Any]], model: Any) -> Agent[Any]:
    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append({"path": path})
        return f"deleted {path}"

    return Agent(model, tools=[delete])


async def test_a_pending_approval_is_an_interrupt_and_the_next_request_decides_it(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    model = ScriptedModel([scripted_call("delete", {"path": "a.txt"}, id="call_del"), "done"])
    app = AGUIApp(approval_agent(ran, model))
    async with serving(app) as served:
        _, first = await post(served.url, run_input("delete a.txt"))
        assert ran == []
        finished = first[-1]
        assert finished["type"] == "RUN_FINISHED"
        [interrupt] = finished["outcome"]["interrupts"]
        assert finished["outcome"]["type"] == "interrupt"
        assert interrupt["id"] == "call_del" and interrupt["toolCallId"] == "call_del"
        assert interrupt["reason"] == "tool_call"
        assert interrupt["metadata"]["agentloop"]["kind"] == "approval"
        assert interrupt["responseSchema"]["required"] == ["approved"]
        _, second = await post(served.url, resumed(first, {"call_del": {"approved": True}}, "r2"))
    assert ran == [{"path": "a.txt"}]
    [result] = [e for e in second if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "call_del" and result["content"] == "deleted a.txt"
    assert "TOOL_CALL_START" not in types(second)  # the call streamed in the first run
    assert types(second)[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert second[-1]["outcome"] == {"type": "success"} and second[-1]["result"] == "done"
    validate(served.tap.bodies[0], tmp_path, "pending")
    validate(served.tap.bodies[1], tmp_path, "decided")


@pytest.mark.parametrize(
    "resume",
    [
        [{"interruptId": "call_forged", "status": "resolved", "payload": {"approved": True}}],
        [],
    ],
    ids=["forged-id", "no-answer"],
)
async def test_a_forged_or_missing_answer_runs_nothing(
    tmp_path: Path, resume: list[dict[str, Any]]
) -> None:
    ran: list[dict[str, Any]] = []
    model = ScriptedModel([scripted_call("delete", {"path": "a.txt"}, id="call_del"), "done"])
    app = AGUIApp(approval_agent(ran, model))
    async with serving(app) as served:
        await post(served.url, run_input("delete a.txt"))
        _, events = await post(served.url, run_input("now", run="r2", resume=resume))
    assert ran == []
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "InvalidInput"
    assert "call_del" in events[-1]["message"]
    validate(served.tap.bodies[1], tmp_path, "forged")
    [session] = app.sessions._sessions.values()
    assert session.current_run is not None and session.current_run.paused


async def test_a_denial_and_an_edit_are_decisions(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []
    model = ScriptedModel(
        [
            scripted_call("delete", {"path": "a.txt"}, id="c1"),
            "kept it",
            scripted_call("delete", {"path": "b.txt"}, id="c2"),
            "deleted c",
        ]
    )
    app = AGUIApp(approval_agent(ran, model))
    async with serving(app) as served:
        await post(served.url, run_input("delete a"))
        deny = {"approved": False, "message": "keep it"}
        resume = [{"interruptId": "c1", "status": "resolved", "payload": deny}]
        _, denied = await post(served.url, run_input("", run="r2", resume=resume))
        await post(served.url, run_input("delete b", run="r3"))
        edit = {"approved": True, "editedArgs": {"path": "c.txt"}}
        resume = [{"interruptId": "c2", "status": "resolved", "payload": edit}]
        _, edited = await post(served.url, run_input("", run="r4", resume=resume))
    [result] = [e for e in denied if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == "User denied permission: keep it"
    assert result["metadata"] == {"agentloop": {"error": True}}
    assert ran == [{"path": "c.txt"}]
    [result] = [e for e in edited if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == "deleted c.txt"


async def test_the_validator_accepts_the_live_endpoint() -> None:
    async with FakeProviderServer(default=FakeReply("hello there")) as provider:
        async with serving(AGUIApp(fake_agent(provider))) as served:
            process = await asyncio.create_subprocess_exec(
                VALIDATE, served.url, "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            out, err = await process.communicate()
    report = json.loads(out)
    assert process.returncode == 0, (report["diagnostics"], err)


# -- the real client: @ag-ui/client in node --------------------------------------------------------


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (make ui-deps needs it)")
    if not (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip("tests/ui/node/node_modules is missing: run `make ui-deps`")
    return node


async def run_node(node: str, url: str, plan: dict[str, Any]) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        node,
        str(NODE_DIR / "agui_run.mjs"),
        url,
        json.dumps(plan),
        cwd=NODE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    seen: dict[str, Any] = json.loads(out)
    return seen


async def test_the_ag_ui_client_assembles_a_tool_turn_with_reasoning() -> None:
    node = node_or_skip()
    script = [
        FakeReply(
            thinking="I should add", tool_calls=[FakeToolCall("add", {"a": 1, "b": 2}, id="c_add")]
        ),
        FakeReply(tool_calls=[FakeToolCall("lookup", {"key": "z"}, id="c_look")]),
        FakeReply("1 + 2 = 3"),
    ]
    async with FakeProviderServer(script) as provider:
        app = AGUIApp(fake_agent(provider, tools=[add, lookup]))
        async with serving(app) as served:
            seen = await run_node(node, served.url, {"threadId": "n1", "steps": [{"say": "go"}]})
    [run] = seen["runs"]
    assert run["error"] is None and run["outcome"] == "success"
    roles = [m["role"] for m in seen["messages"]]
    assert roles == ["user", "reasoning", "assistant", "tool", "assistant", "tool", "assistant"]
    calls = [m for m in seen["messages"] if m["role"] == "assistant" and m.get("toolCalls")]
    assert calls[0]["toolCalls"][0]["function"] == {"name": "add", "arguments": '{"a": 1, "b": 2}'}
    tools = [m for m in seen["messages"] if m["role"] == "tool"]
    assert tools[0]["content"] == "3" and "metadata" not in tools[0]
    assert tools[1]["metadata"] == {"agentloop": {"error": True}}
    assert seen["messages"][-1]["content"] == "1 + 2 = 3"
    assert seen["messages"][1]["content"] == "I should add"


async def test_the_ag_ui_client_answers_an_interrupt_in_its_next_run() -> None:
    node = node_or_skip()
    ran: list[dict[str, Any]] = []
    model = ScriptedModel([scripted_call("delete", {"path": "a.txt"}, id="c_del"), "gone"])
    app = AGUIApp(approval_agent(ran, model))
    plan = {"threadId": "n2", "steps": [{"say": "delete a.txt"}, {"resume": {"approved": True}}]}
    async with serving(app) as served:
        seen = await run_node(node, served.url, plan)
    first, second = seen["runs"]
    assert first["outcome"] == "interrupt" and first["error"] is None
    assert [i["id"] for i in first["interrupts"]] == ["c_del"]
    assert second["outcome"] == "success" and second["error"] is None
    expected = {"toolCallId": "c_del", "content": "deleted a.txt", "metadata": None}
    assert second["results"] == [expected]
    assert ran == [{"path": "a.txt"}]
    assert seen["messages"][-1] == {**seen["messages"][-1], "role": "assistant", "content": "gone"}


async def test_the_ag_ui_client_sees_a_hard_error() -> None:
    node = node_or_skip()
    async with FakeProviderServer([Fault.auth()]) as provider:
        async with serving(AGUIApp(fake_agent(provider))) as served:
            seen = await run_node(node, served.url, {"threadId": "n3", "steps": [{"say": "hi"}]})
    [run] = seen["runs"]
    assert run["error"]["code"] == "AuthError"
    assert run["error"]["metadata"]["agentloop"]["phase"] == "status"


def test_approve_is_the_decision_an_approved_payload_makes() -> None:
    from agentloop import PendingCall
    from agentloop.messages import ToolCallPart
    from agentloop.ui._ag_ui_input import decisions

    pending = [PendingCall(ToolCallPart("c", "delete", {}), "approval")]
    from ag_ui.core import ResumeEntry

    entry = ResumeEntry(interrupt_id="c", status="resolved", payload={"approved": True})
    assert decisions(pending, [entry]) == {"c": Approve()}


async def test_every_frame_is_the_official_encoders_json() -> None:
    from ag_ui import core
    from ag_ui.encoder import EventEncoder
    from pydantic import TypeAdapter

    from agentloop.ui._ag_ui_events import AGUIEvents

    tricky = 'naïve "quotes" \\ back\nslash, emoji 🎉, \u2028 and \x01'
    model = ScriptedModel([[tricky, scripted_call("add", {"a": 1, "b": tricky})], tricky])
    agent = Agent(model, tools=[add])
    out = AGUIEvents("t", "r")
    text = ""
    async with agent.stream("go") as events:
        async for event in events:
            text += out.feed(event)
            if type(event).__name__ == "RunFinished":
                text += out.finish(event.run)  # type: ignore[attr-defined]
    adapter: TypeAdapter[Any] = TypeAdapter(core.Event)
    encoder = EventEncoder()
    frames = [f for f in text.split("\n\n") if f]
    assert all(f.startswith("data: ") for f in frames)
    for frame in frames:
        sent = json.loads(frame[len("data: ") :])
        official = encoder.encode(adapter.validate_python(sent))
        assert json.loads(official[len("data: ") :]) == sent
    said = [json.loads(f[6:]) for f in frames]
    deltas = "".join(e["delta"] for e in said if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert deltas == tricky * 2
    args = "".join(e["delta"] for e in said if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"a": 1, "b": tricky}


@pytest.mark.parametrize(
    ("answer", "status", "read"),
    [
        ({"content": "teal"}, "resolved", "teal"),
        (None, "cancelled", "User denied permission"),
    ],
    ids=["answered", "cancelled"],
)
async def test_an_external_call_is_answered_by_the_next_request(
    tmp_path: Path, answer: dict[str, Any] | None, status: str, read: str
) -> None:
    @tool(external=True)
    def pick_color() -> str:
        """The user picks a color in the page."""
        raise AssertionError("an external tool never runs on the server")

    model = ScriptedModel([scripted_call("pick_color", id="c_pick"), "noted"])
    app = AGUIApp(Agent(model, tools=[pick_color]))
    async with serving(app) as served:
        _, first = await post(served.url, run_input("pick a color"))
        [interrupt] = first[-1]["outcome"]["interrupts"]
        assert interrupt["metadata"]["agentloop"]["kind"] == "external"
        entry: dict[str, Any] = {"interruptId": "c_pick", "status": status}
        if answer is not None:
            entry["payload"] = answer
        body = resumed(first, {}, "r2", said="pick a color")
        body["resume"] = [entry]
        _, second = await post(served.url, body)
    [result] = [e for e in second if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == read
    assert second[-1]["outcome"] == {"type": "success"}
    validate(served.tap.bodies[1], tmp_path, "external")


def test_a_reset_attempt_ends_its_messages_and_the_retry_streams_anew(tmp_path: Path) -> None:
    from agentloop import events as ev
    from agentloop.messages import Message
    from agentloop.model import ModelResponse
    from agentloop.ui._ag_ui_events import AGUIEvents

    out = AGUIEvents("t", "r")
    reply = ModelResponse(Message.assistant("whole answer"), model="m")
    fed = [
        ev.RunStarted("run", 0, run=None),  # type: ignore[arg-type]
        ev.TurnStarted("run", 0),
        ev.ThinkingDelta("run", 0, "hmm"),
        ev.TextDelta("run", 0, "partial"),
        ev.ToolCallDelta("run", 0, 0, "add", '{"a": 1', call_id="c1"),
        ev.AttemptReset("run", 0),
        ev.TextDelta("run", 0, "whole "),
        ev.TextDelta("run", 0, "answer"),
        ev.ModelResponded("run", 0, reply),
    ]
    text = "".join(out.feed(event) for event in fed)
    said = [json.loads(f[6:]) for f in text.split("\n\n") if f]
    starts = [e["messageId"] for e in said if e["type"] == "TEXT_MESSAGE_START"]
    ends = [e["messageId"] for e in said if e["type"] == "TEXT_MESSAGE_END"]
    assert len(starts) == 2 and starts == ends and starts[0] != starts[1]
    assert [e["type"] for e in said].count("TOOL_CALL_END") == 1
    retried = [e["delta"] for e in said if e.get("messageId") == starts[1] and "delta" in e]
    assert "".join(retried) == "whole answer"
    assert [e["type"] for e in said].count("REASONING_START") == 1


async def test_partial_output_and_other_events_are_namespaced_custom_events(
    tmp_path: Path,
) -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        population: int

    answer = {"name": "Paris", "population": 2100000}
    agent = Agent(ScriptedModel([scripted_call("final_result", answer)]), output_type=City)
    async with serving(AGUIApp(agent)) as served:
        _, events = await post(served.url, run_input("a big city"))
    custom = [e for e in events if e["type"] == "CUSTOM"]
    partial = [e["value"]["value"] for e in custom if e["name"] == "agentloop:PartialOutput"]
    assert partial and partial[-1] == answer
    assert events[-1]["result"] == answer
    validate(served.tap.bodies[0], tmp_path, "typed")
