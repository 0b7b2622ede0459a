"""A client abort on a thread whose run has paused ends that run (SPEC 17, 18), over real HTTP.

The server's run pauses on an approval; its ``on_run_end`` hook holds the paused run's finalize
until the server has seen the client go away (a spy on the ASGI ``receive``), so the abort comes
while the response is still open: the AG-UI client is aiohttp closing its response, the Vercel
client the ``ai`` package's own ``chat.stop()`` (``tests/ui/node/vercel_chat.mjs``).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")
import aiohttp

from agentloop import Agent, Session, tool
from agentloop import events as ev
from agentloop.errors import Cancelled
from agentloop.hooks import Hook
from agentloop.observers import Observer
from agentloop.run import Run
from agentloop.testing import ScriptedModel, call, reply
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

from ._serve import serving

SCRIPT = Path(__file__).parent / "node" / "vercel_chat.mjs"
RAN: list[str] = []


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    RAN.append(path)
    return f"deleted {path}"


class Spy:
    """The app, with an event set when the server reads the client's disconnect."""

    def __init__(self) -> None:
        self.app: Any = None
        self.gone = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def spied() -> Any:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.gone.set()
            return message

        await self.app(scope, spied, send)


class HoldPause(Hook):
    """A paused run's finalize waits until the client has left (the abort comes mid-response)."""

    def __init__(self, spy: Spy) -> None:
        self.spy = spy

    async def on_run_end(self, run: Run[Any]) -> None:
        if run.paused:
            await asyncio.wait_for(self.spy.gone.wait(), 20)


class Ended(Observer):
    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.finished: list[tuple[str, bool]] = []

    def on_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.RunFinished):
            self.finished.append((event.run.id, event.run.paused))
            if isinstance(event.run.stop_reason, Cancelled):
                self.cancelled.set()


def agent_for(spy: Spy, ended: Ended) -> Agent[Any]:
    model = ScriptedModel([call("delete", {"path": "a"}, id="c1"), reply("fresh start")])
    return Agent(model, tools=[delete], hooks=[HoldPause(spy)], observers=[ended])


def ag_ui_request(text: str, run: str) -> dict[str, Any]:
    message = {"id": f"u-{run}", "role": "user", "content": text}
    return {"threadId": "t1", "runId": run, "messages": [message]}


async def test_an_ag_ui_abort_on_a_paused_run_cancels_it() -> None:
    RAN.clear()
    spy, ended = Spy(), Ended()
    spy.app = app = AGUIApp(agent_for(spy, ended))
    async with serving(spy) as url, aiohttp.ClientSession() as http:
        response = await http.post(url, json=ag_ui_request("delete a", "r1"))
        async for line in response.content:  # the pending call streams in: abort
            if line.startswith(b"data: ") and json.loads(line[6:])["type"] == "TOOL_CALL_END":
                break
        response.close()
        await asyncio.wait_for(ended.cancelled.wait(), 20)
        session = app.sessions.get("t1", list)
        run = session.runs[0]
        assert isinstance(run.stop_reason, Cancelled) and not run.paused
        assert ended.finished == [(run.id, True), (run.id, False)]  # paused, then cancel_run
        async with http.post(url, json=ag_ui_request("start over", "r2")) as again:
            said = [json.loads(x[6:]) for x in (await again.read()).split(b"\n\n") if x]
    assert said[-1]["type"] == "RUN_FINISHED" and said[-1]["outcome"] == {"type": "success"}
    assert session.runs[-1].output == "fresh start" and RAN == []


async def test_a_pause_read_to_the_end_stays_paused() -> None:
    ended = Ended()
    model = ScriptedModel([call("delete", {"path": "a"}, id="c1")])
    app = AGUIApp(Agent(model, tools=[delete], observers=[ended]))
    async with serving(app) as url, aiohttp.ClientSession() as http:
        async with http.post(url, json=ag_ui_request("delete a", "r1")) as response:
            await response.read()
    session = app.sessions.get("t1", list)
    assert session.runs[0].paused and not ended.cancelled.is_set()


needs_node = pytest.mark.skipif(
    shutil.which("node") is None
    or not (SCRIPT.parent / "node_modules" / "ai" / "package.json").exists(),
    reason="node or tests/ui/node/node_modules/ai is missing (make ui-deps)",
)


@needs_node
async def test_a_vercel_stop_on_a_paused_run_cancels_it() -> None:
    RAN.clear()
    spy, ended = Spy(), Ended()
    agent = agent_for(spy, ended)
    sessions: dict[str, Session[Any]] = {}

    def pick(request: Any, thread_id: str) -> Session[Any]:
        return sessions.setdefault(thread_id, agent.session())

    spy.app = VercelAIApp(agent, session=pick)
    async with serving(spy) as url:
        steps = [{"send": "delete a", "stopOn": "tool"}]
        scenario = {"url": url, "chatId": "chat-1", "steps": steps}
        proc = await asyncio.create_subprocess_exec(
            "node", str(SCRIPT), json.dumps(scenario), stdout=-1, stderr=-1
        )
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        await asyncio.wait_for(ended.cancelled.wait(), 20)
        session = sessions["chat-1"]
        run = session.runs[0]
        assert isinstance(run.stop_reason, Cancelled)
        assert ended.finished == [(run.id, True), (run.id, False)]  # paused, then cancel_run
        again = {"url": url, "chatId": "chat-1", "steps": [{"send": "start over"}]}
        proc = await asyncio.create_subprocess_exec(
            "node", str(SCRIPT), json.dumps(again), stdout=-1, stderr=-1
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
    assert session.runs[-1].output == "fresh start" and RAN == []
    assert json.loads(out)["errors"] == []
