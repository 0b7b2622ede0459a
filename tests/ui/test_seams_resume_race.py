"""Two browser tabs answer one interrupt at once, each through its own worker (AG-UI, SPEC 17, 18).

Two ``AGUIApp`` workers, each with its own ``Agent`` over one ``SQLiteStore`` file (as two
processes of a web app would be), on real uvicorn servers; the model is the fake
OpenAI-compatible server behind the real adapter. The run pauses on an approval through the
first worker; then both workers get the thread's answer at the same moment, one approving and
one denying. Exactly one continues: the tool runs once, the other request ends in a typed
``RUN_ERROR`` (the run is being run elsewhere, or is no longer paused; its message names no host
or process of the server), and the store holds one decision set and the completed run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")
import aiohttp
from tests.ui._serve import serving

from agentloop import Agent, tool
from agentloop.providers import OpenAIClient
from agentloop.store import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, FakeToolCall
from agentloop.ui._client_view import STORE_MESSAGE
from agentloop.ui.ag_ui import AGUIApp


def sse(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


async def post(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as response:
        assert response.status == 200
        return sse(await response.text())


def picker(worker: Agent[Any]) -> Callable[[Any, str], Any]:
    """The worker's ``session=``: the thread is the session id, in the shared store."""
    return lambda request, thread: worker.session(thread)


def answer(approved: bool, run: str) -> dict[str, Any]:
    payload = {"approved": approved}
    resume = [{"interruptId": "call_r1", "status": "resolved", "payload": payload}]
    return {"threadId": "shop", "runId": run, "messages": [], "resume": resume}


async def test_two_workers_answer_one_interrupt_and_exactly_one_wins(tmp_path: Path) -> None:
    ran: list[str] = []
    entered, release = asyncio.Event(), asyncio.Event()

    @tool(requires_approval=True)
    async def refund(order: str) -> str:
        """Refund an order."""
        ran.append(order)
        entered.set()
        await release.wait()
        return f"refunded {order}"

    script = [
        FakeReply(tool_calls=[FakeToolCall("refund", {"order": "A-1"}, id="call_r1")]),
        FakeReply("Refunded."),
    ]
    db = tmp_path / "agentloop.db"
    async with FakeProviderServer(script) as fake:
        client = OpenAIClient("fake-model", api_key="k", base_url=fake.base_url)
        async with client:
            workers = [Agent(client, tools=[refund], store=SQLiteStore(db)) for _ in range(2)]
            apps = [AGUIApp(w, session=picker(w)) for w in workers]
            async with serving(apps[0]) as first, serving(apps[1]) as second:
                message = {"id": "u1", "role": "user", "content": "refund A-1"}
                ask: dict[str, Any] = {"threadId": "shop", "runId": "r0", "messages": [message]}
                paused = await post(first, ask)
                assert paused[-1]["outcome"]["type"] == "interrupt"
                approving = asyncio.create_task(post(first, answer(True, "r1")))
                await entered.wait()  # the approval holds the run, its tool running
                denied = await post(second, answer(False, "r2"))
                release.set()
                approved = await approving
    assert ran == ["A-1"]
    assert approved[-1]["type"] == "RUN_FINISHED" and approved[-1]["result"] == "Refunded."
    assert denied[-1]["type"] == "RUN_ERROR"
    assert denied[-1]["code"] in ("MemoryBackendError", "InvalidInput"), denied[-1]
    assert "TOOL_CALL_RESULT" not in [e["type"] for e in denied]
    if denied[-1]["code"] == "MemoryBackendError":  # the worker's host and pid stay inside
        assert denied[-1]["message"] == STORE_MESSAGE
    store = SQLiteStore(db)
    try:
        [record] = store.load_runs("shop")
    finally:
        store.close()
    assert record.run.output == "Refunded." and len(record.run.decisions) == 1
