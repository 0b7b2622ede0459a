"""A chat stopped while a tool ran goes on after a restart (SPEC 18), with the real clients.

The user stops the chat mid-tool (the ``ai`` package's ``chat.stop()``, ``@ag-ui/client``'s
``abortRun()``); the client keeps the call as it last saw it, without a result. The server is
then restarted (a new app, so a new default session seeded from the client's history, as a new
worker would be). That history is what the protocol's own client produces, not a hostile
request: the seed closes the stopped call as the engine closes an interrupted one (the soft
``INTERRUPTED_TEXT``) and the user's next message runs, where it used to be a 400/422
``TranscriptError`` on every message for good.
"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")

from agentloop import Agent, ToolContext, tool
from agentloop import events as ev
from agentloop.errors import Cancelled
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.observers import Observer
from agentloop.testing import ScriptedModel, call, reply
from agentloop.transcript import INTERRUPTED_TEXT
from agentloop.ui._sessions import close_stopped
from agentloop.ui._stopped import open_calls
from agentloop.ui._vercel_request import UIMessage, unfinished
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

from ._serve import serving
from .test_ag_ui import validate

NODE = Path(__file__).parent / "node"

needs_node = pytest.mark.skipif(
    shutil.which("node") is None
    or not (NODE / "node_modules" / "ai" / "package.json").exists()
    or not (NODE / "node_modules" / "@ag-ui" / "client" / "package.json").exists(),
    reason="node or tests/ui/node/node_modules is missing (make ui-deps)",
)


@tool
async def wait(ctx: ToolContext[Any]) -> str:
    """Wait for the user."""
    await asyncio.Event().wait()
    return "unreachable"


class Cancels(Observer):
    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    def on_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.RunFinished) and isinstance(event.run.stop_reason, Cancelled):
            self.cancelled.set()


class Restartable:
    """The served ASGI app; the test swaps ``app`` for a new one (the server restarted)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def agent(cancels: Cancels, *steps: Any) -> tuple[Agent[Any], ScriptedModel]:
    model = ScriptedModel(list(steps))
    return Agent(model, tools=[wait], observers=[cancels]), model


async def restarted(
    tmp_path: Path, face: Any, script: str, args: list[str], *, restart: bool = True
) -> tuple[dict[str, Any], ScriptedModel]:
    """Run ``script``; once its first run is cancelled, restart the app and let it go on.

    ``restart=False``: the same app (the same worker, the session the cancel closed) goes on.
    """
    cancels = Cancels()
    first, model = agent(cancels, call("wait", {}, id="c1"), reply("Back again."))
    served = Restartable(face(first))
    async with serving(served, "/chat") as url:
        argv = [a.replace("{url}", url) for a in args]
        proc = await asyncio.create_subprocess_exec(
            "node", str(NODE / script), *argv, stdout=-1, stderr=-1
        )
        communicated = asyncio.ensure_future(proc.communicate())
        await asyncio.wait_for(cancels.cancelled.wait(), 30)
        if restart:
            second, model = agent(Cancels(), reply("Back again."))
            served.app = face(second)  # a new server: its sessions start from the client's history
        (tmp_path / "restarted").touch()
        out, err = await asyncio.wait_for(communicated, 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out), model


def assert_closed_as_interrupted(model: ScriptedModel, *, restart: bool = True) -> None:
    """What the model read of the stopped call in the next run.

    A new worker seeds the client's history, the call closed as interrupted; the same worker
    goes on from its session, where the cancelled run committed no turn in flight (SPEC 5).
    """
    request = model.requests[-1]
    results = [p for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]
    closed = ToolResultPart("c1", "wait", INTERRUPTED_TEXT, is_error=True)
    assert results == ([closed] if restart else [])


WORKERS = pytest.mark.parametrize("restart", [False, True], ids=["same-worker", "new-worker"])


@needs_node
@WORKERS
async def test_a_vercel_chat_stopped_mid_tool_goes_on_and_its_page_sees_the_call_end(
    tmp_path: Path, restart: bool
) -> None:
    steps = [
        {"send": "wait for me", "stopOn": "tool"},
        {"wait": str(tmp_path / "restarted")},
        {"send": "hello again"},
    ]
    scenario = {"url": "{url}", "chatId": "chat-1", "steps": steps}
    args = [json.dumps(scenario)]
    seen, model = await restarted(tmp_path, VercelAIApp, "vercel_chat.mjs", args, restart=restart)
    assert seen["errors"] == [] and seen["statuses"] == ["ready", "ready"]
    assert_closed_as_interrupted(model, restart=restart)
    told = [d["data"] for d in seen["data"] if d["data"].get("type") == "StoppedCalls"]
    calls = [{"toolCallId": "c1", "toolName": "wait", "errorText": INTERRUPTED_TEXT}]
    assert told == [{"type": "StoppedCalls", "calls": calls}]
    stopped, final = seen["after"][0], seen["messages"]
    expected = copy.deepcopy(stopped)  # the page's addToolOutput finished the call, in place
    [part] = [p for p in expected[-1]["parts"] if p.get("toolCallId") == "c1"]
    assert part["state"] in ("input-streaming", "input-available")
    part.update(state="output-error", errorText=INTERRUPTED_TEXT)
    assert final[: len(stopped)] == expected
    asked, answer = final[len(stopped) :]
    assert asked["role"] == "user" and answer["role"] == "assistant"
    assert answer["parts"] == [{"type": "step-start"}, *texts(answer, "Back again.")]


@needs_node
async def test_a_page_without_the_stopped_calls_lines_goes_on_unharmed(tmp_path: Path) -> None:
    steps = [
        {"send": "wait for me", "stopOn": "tool"},
        {"wait": str(tmp_path / "restarted")},
        {"send": "hello again"},
    ]
    scenario = {"url": "{url}", "chatId": "chat-1", "steps": steps, "plainPage": True}
    seen, _ = await restarted(tmp_path, VercelAIApp, "vercel_chat.mjs", [json.dumps(scenario)])
    assert seen["errors"] == [] and seen["statuses"] == ["ready", "ready"]
    stopped, final = seen["after"][0], seen["messages"]
    assert final[: len(stopped)] == stopped  # the transient part changed nothing by itself
    assert texts(final[-1], "Back again.")


def texts(message: dict[str, Any], text: str) -> list[dict[str, Any]]:
    """``message``'s text parts, checked to read ``text`` together."""
    parts = [p for p in message["parts"] if p["type"] == "text"]
    assert "".join(p["text"] for p in parts) == text
    return parts


@needs_node
@WORKERS
async def test_an_ag_ui_chat_aborted_mid_tool_goes_on_and_its_page_sees_the_call_end(
    tmp_path: Path, restart: bool
) -> None:
    steps = [
        {"say": "wait for me", "abortOn": "TOOL_CALL_END"},
        {"wait": str(tmp_path / "restarted")},
        {"say": "hello again"},
    ]
    plan = json.dumps({"threadId": "t1", "steps": steps})
    args = ["{url}", plan]
    seen, model = await restarted(tmp_path, AGUIApp, "agui_run.mjs", args, restart=restart)
    first, again = seen["runs"]
    assert again["error"] is None and again["outcome"] == "success"
    assert_closed_as_interrupted(model, restart=restart)
    error = {"agentloop": {"error": True}}
    result = {"toolCallId": "c1", "content": INTERRUPTED_TEXT, "metadata": error}
    assert again["results"] == [result]
    assert again["events"][:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "TOOL_CALL_RESULT"]
    stopped, final = first["messages"], seen["messages"]
    assert final[: len(stopped)] == stopped  # what the page held is as it was
    closed, asked, answer = final[len(stopped) :]
    assert {k: closed[k] for k in ("role", "toolCallId", "content")} == {
        "role": "tool",
        "toolCallId": "c1",
        "content": INTERRUPTED_TEXT,
    }
    assert asked["role"] == "user" and answer == {**answer, "content": "Back again."}


async def test_an_ag_ui_stream_that_closes_an_earlier_call_is_valid(tmp_path: Path) -> None:
    app = AGUIApp(agent(Cancels(), reply("Back again."))[0])
    call_msg = {"id": "a1", "role": "assistant", "toolCalls": [WAIT_CALL]}
    messages = [user_message("u1", "wait for me"), call_msg, user_message("u2", "hello again")]
    body = {"threadId": "t1", "runId": "r2", "messages": messages, **EMPTY_INPUT}
    async with serving(app, "/chat") as url, httpx.AsyncClient() as client:
        response = await client.post(url, json=body, headers={"accept": "text/event-stream"})
    assert response.status_code == 200
    assert b'"type":"TOOL_CALL_RESULT"' in response.content
    validate(response.content, tmp_path, "stopped")


async def test_the_vercel_response_tells_right_after_start(tmp_path: Path) -> None:
    app = VercelAIApp(agent(Cancels(), reply("Back again."))[0])
    part = {"type": "tool-wait", "toolCallId": "c1", "state": "input-available", "input": {}}
    messages = [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "wait for me"}]},
        {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}, part]},
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "hello again"}]},
    ]
    body = {"id": "chat-1", "messages": messages, "trigger": "submit-message"}
    async with serving(app, "/chat") as url, httpx.AsyncClient() as client:
        response = await client.post(url, json=body)
    lines = [line[6:] for line in response.text.split("\n") if line.startswith("data: {")]
    chunks = [json.loads(line) for line in lines]
    calls = [{"toolCallId": "c1", "toolName": "wait", "errorText": INTERRUPTED_TEXT}]
    told = {"type": "StoppedCalls", "calls": calls}
    assert [c["type"] for c in chunks[:3]] == ["start", "data-agentloop", "start-step"]
    assert chunks[1] == {"type": "data-agentloop", "data": told, "transient": True}
    assert [c for c in chunks if c["type"] == "data-agentloop"] == [chunks[1]]


def test_only_calls_without_an_output_anywhere_are_open() -> None:
    closed = {"type": "tool-f", "toolCallId": "c1", "state": "output-error", "errorText": "x"}
    parts: list[dict[str, Any]] = [
        {"type": "tool-f", "toolCallId": "c1", "state": "input-available", "input": {}},
        {"type": "dynamic-tool", "toolName": "g", "toolCallId": "c2", "state": "input-streaming"},
        {"type": "text", "text": "hi"},
    ]
    made = [
        UIMessage("a1", "assistant", tuple(parts)),
        UIMessage("a2", "assistant", (closed,)),
    ]
    assert unfinished(made) == ["c2"]
    call = Message.assistant("", [ToolCallPart("c1", "f", {}), ToolCallPart("c2", "f", {})])
    answered = Message.tool_results([ToolResultPart("c1", "f", "ok")])
    assert open_calls([Message.user("a"), call, answered]) == ["c2"]


WAIT_CALL = {"id": "c1", "type": "function", "function": {"name": "wait", "arguments": "{}"}}
EMPTY_INPUT: dict[str, Any] = {"state": {}, "tools": [], "context": [], "forwardedProps": {}}


def user_message(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


def test_only_a_missing_result_is_closed_a_malformed_history_is_left_to_refuse() -> None:
    ask, later = Message.user("a"), Message.user("b")
    calls = Message.assistant("", [ToolCallPart("c1", "f", {}), ToolCallPart("c2", "f", {})])
    done = ToolResultPart("c1", "f", "ok")
    closed = ToolResultPart("c2", "f", INTERRUPTED_TEXT, is_error=True)
    one = Message.tool_results([done])
    assert close_stopped([ask, calls, one, later]) == [
        ask,
        calls,
        Message.tool_results([done, closed]),
        later,
    ]
    stranger = Message.tool_results([done, ToolResultPart("zz", "f", "?")])
    twice = Message.tool_results([done, done])
    for malformed in ([ask, calls, stranger, later], [ask, calls, twice, later]):
        assert close_stopped(malformed) == malformed
