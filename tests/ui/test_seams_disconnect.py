"""The end user closes the tab mid-run: what the server, the tools and the store are left with.

Both apps on a real uvicorn server; each request runs on ``agent.session(thread)`` of an agent
over a real ``SQLiteStore``; the client is aiohttp, which drops the connection mid-stream (the
browser closing the tab). Cut during a tool call and during the model's stream (the fake
OpenAI-compatible server behind the real adapter, streaming slowly): the run is finalized as
``Cancelled`` and stored so (read back through a second store on the file), the tool's cancel
token is set, and no task is left behind nor an exception left unretrieved on the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")
import aiohttp
from tests.ui._serve import serving

from agentloop import Agent, RunConfig, ToolContext, tool
from agentloop.errors import Cancelled
from agentloop.providers import OpenAIClient
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

SLOW = FakeReply(" ".join(["word"] * 400), chunk_delay=0.02)


def body(face: str, text: str) -> dict[str, Any]:
    if face == "ag_ui":
        message = {"id": "u1", "role": "user", "content": text}
        return {"threadId": "tab", "runId": "r1", "messages": [message]}
    parts = [{"type": "text", "text": text}]
    return {"id": "tab", "messages": [{"id": "u1", "role": "user", "parts": parts}]}


@asynccontextmanager
async def loop_watch() -> AsyncIterator[list[dict[str, Any]]]:
    """What the loop's exception handler was given while the block ran (none expected)."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        yield seen
    finally:
        loop.set_exception_handler(before)


class Waiting:
    """A tool that waits until its call is cancelled, keeping its cancel token."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.tokens: list[Any] = []

        @tool
        async def wait(ctx: ToolContext[Any]) -> str:
            """Wait for the user."""
            self.tokens.append(ctx.cancel)
            self.started.set()
            await asyncio.Event().wait()
            return "unreachable"

        self.tool = wait


async def cut(face: str, agent: Agent[Any], ready: Any, text: str) -> None:
    """Serve ``agent`` on ``face``; drop the client once ``ready`` fires; wait for the end."""
    sessions: list[Any] = []

    def pick(request: Any, thread: str) -> Any:
        sessions.append(agent.session(thread))
        return sessions[-1]

    app: Any = (AGUIApp if face == "ag_ui" else VercelAIApp)(agent, session=pick)
    async with serving(app) as url:
        async with aiohttp.ClientSession() as http:
            response = await http.post(url, json=body(face, text))
            assert response.status == 200
            await ready(response)
            response.close()  # the tab is closed mid-run
        [session] = sessions
        for _ in range(1000):  # the server learns of the disconnect, then finalizes the run
            run = session.current_run
            if run is not None and run.ended_at is not None:
                break
            await asyncio.sleep(0.01)


def stored_stop(path: Path) -> Any:
    """The run's stop reason as another process would read it: a second store on the file."""
    store = SQLiteStore(path)
    try:
        [stored] = store.load_runs("tab")
    finally:
        store.close()
    return stored.run.stop_reason


@pytest.mark.parametrize("face", ["ag_ui", "vercel"])
async def test_a_tab_closed_during_a_tool_cancels_and_stores_the_run(
    face: str, tmp_path: Path
) -> None:
    waiting = Waiting()
    script = [FakeReply(tool_calls=[FakeToolCall("wait", {}, id="call_wait")]), FakeReply("no")]
    tasks = asyncio.all_tasks()
    async with loop_watch() as loop_errors, FakeProviderServer(script) as fake:
        client = OpenAIClient("fake-model", api_key="sk-test-key", base_url=fake.base_url)
        store = SQLiteStore(tmp_path / "runs.db")
        async with client:
            agent = Agent(client, tools=[waiting.tool], store=store)
            await cut(face, agent, lambda _: waiting.started.wait(), "wait for me")
            [token] = waiting.tokens
            assert token.cancelled
            assert len(fake.requests) == 1  # nothing asked the model after the tab closed
        assert isinstance(stored_stop(tmp_path / "runs.db"), Cancelled)
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - tasks == set()
    assert loop_errors == []


@pytest.mark.parametrize("face", ["ag_ui", "vercel"])
async def test_a_tab_closed_during_the_models_stream_cancels_and_stores_the_run(
    face: str, tmp_path: Path
) -> None:
    tasks = asyncio.all_tasks()
    async with loop_watch() as loop_errors, FakeProviderServer([SLOW]) as fake:
        client = OpenAIClient("fake-model", api_key="sk-test-key", base_url=fake.base_url)
        store = SQLiteStore(tmp_path / "runs.db")
        async with client:
            agent = Agent(client, store=store, config=RunConfig(stream=True))

            async def ready(response: aiohttp.ClientResponse) -> None:
                seen = b""  # the end user has read some of the reply
                while b"TEXT_MESSAGE_CONTENT" not in seen and b"text-delta" not in seen:
                    seen += await response.content.readany()

            await cut(face, agent, ready, "talk")
        stop = stored_stop(tmp_path / "runs.db")
        assert isinstance(stop, Cancelled)
        assert SQLiteStore(tmp_path / "runs.db").load_history("tab") == []  # never committed
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - tasks == set()
    assert loop_errors == []
