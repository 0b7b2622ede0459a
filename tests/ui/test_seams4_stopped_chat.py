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
import json
import shutil
from pathlib import Path
from typing import Any

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
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

from ._serve import serving

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


def agent(cancels: Cancels, step: Any) -> tuple[Agent[Any], ScriptedModel]:
    model = ScriptedModel([step])
    return Agent(model, tools=[wait], observers=[cancels]), model


async def restarted(
    tmp_path: Path, face: Any, script: str, args: list[str]
) -> tuple[dict[str, Any], ScriptedModel]:
    """Run ``script``; once its first run is cancelled, restart the app and let it go on."""
    cancels = Cancels()
    first, _ = agent(cancels, call("wait", {}, id="c1"))
    served = Restartable(face(first))
    async with serving(served, "/chat") as url:
        argv = [a.replace("{url}", url) for a in args]
        proc = await asyncio.create_subprocess_exec(
            "node", str(NODE / script), *argv, stdout=-1, stderr=-1
        )
        communicated = asyncio.ensure_future(proc.communicate())
        await asyncio.wait_for(cancels.cancelled.wait(), 30)
        second, model = agent(Cancels(), reply("Back again."))
        served.app = face(second)  # a new server: its sessions start from the client's history
        (tmp_path / "restarted").touch()
        out, err = await asyncio.wait_for(communicated, 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out), model


def assert_closed_as_interrupted(model: ScriptedModel) -> None:
    [request] = model.requests
    results = [p for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert results == [ToolResultPart("c1", "wait", INTERRUPTED_TEXT, is_error=True)]


@needs_node
async def test_a_vercel_chat_stopped_mid_tool_goes_on_after_a_restart(tmp_path: Path) -> None:
    steps = [
        {"send": "wait for me", "stopOn": "tool"},
        {"wait": str(tmp_path / "restarted")},
        {"send": "hello again"},
    ]
    scenario = {"url": "{url}", "chatId": "chat-1", "steps": steps}
    seen, model = await restarted(tmp_path, VercelAIApp, "vercel_chat.mjs", [json.dumps(scenario)])
    assert seen["errors"] == [] and seen["status"] == "ready"
    last = seen["messages"][-1]
    assert last["role"] == "assistant"
    assert [p["text"] for p in last["parts"] if p["type"] == "text"] == ["Back again."]
    assert_closed_as_interrupted(model)


@needs_node
async def test_an_ag_ui_chat_aborted_mid_tool_goes_on_after_a_restart(tmp_path: Path) -> None:
    steps = [
        {"say": "wait for me", "abortOn": "TOOL_CALL_END"},
        {"wait": str(tmp_path / "restarted")},
        {"say": "hello again"},
    ]
    plan = json.dumps({"threadId": "t1", "steps": steps})
    seen, model = await restarted(tmp_path, AGUIApp, "agui_run.mjs", ["{url}", plan])
    again = seen["runs"][-1]
    assert again["error"] is None and again["outcome"] == "success"
    assert_closed_as_interrupted(model)


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
