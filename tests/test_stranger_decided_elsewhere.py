"""A thread a web app serves, decided or run by another process meanwhile (SPEC 17, 18, 3).

Found by building a web product from the docs alone: an ``AGUIApp`` (or ``VercelAIApp``) whose
``session=`` picks ``agent.session(thread_id)`` over a ``SQLiteStore`` pauses on an approval; an
operator approves it with ``agentloop continue`` (or the run viewer, or another worker) in
another process; the customer's next message then hit the worker's cached, stale session and
was refused ("this thread waits for answers to its interrupts"), though the store said the run
had completed. docs/persistence.md promises a run starts from what the store holds when another
process "ran, paused, decided or cancelled the session since".

Real parts: the fake OpenAI-compatible server behind the real adapter, the apps on uvicorn,
two ``Agent`` objects on their own ``SQLiteStore`` connections to one file (two processes).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")
import aiohttp
from tests.ui._serve import serving

from agentloop import Agent, Approve, tool
from agentloop.errors import InvalidInput
from agentloop.providers import OpenAIClient
from agentloop.store import SQLiteStore
from agentloop.testing import (
    FakeProviderServer,
    FakeReply,
    FakeToolCall,
    ScriptedModel,
    call,
    reply,
)
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

REFUNDS: list[str] = []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    REFUNDS.append(order)
    return f"refunded {order}"


def sse(text: str) -> list[dict[str, Any]]:
    lines = text.splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]


async def post(url: str, body: dict[str, Any]) -> tuple[int, list[dict[str, Any]], str]:
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as response:
        text = await response.text()
        return response.status, sse(text), text


def picker(worker: Agent[Any]) -> Callable[[Any, str], Any]:
    """The app's ``session=``: the thread is the session id, in the shared store."""
    return lambda request, thread: worker.session(thread)


def approve_elsewhere(db: Path, thread: str) -> None:
    """Another process (what ``agentloop continue --approve`` does): resume, approve, go on."""
    store = SQLiteStore(db)
    try:
        other = Agent.resume(
            thread, store=store, client=ScriptedModel([reply("Refunded.")]), tools=[refund]
        )
        [pending] = other.current_run.pending if other.current_run else []
        assert other.continue_run_sync(decisions={pending.id: Approve()}).output == "Refunded."
    finally:
        store.close()


@asynccontextmanager
async def worker(db: Path, script: list[FakeReply], face: Any, path: str) -> AsyncIterator[str]:
    """A web app's worker: its own agent and store connection, served on uvicorn."""
    async with FakeProviderServer(script) as fake:
        client = OpenAIClient("fake-model", api_key="k", base_url=fake.base_url)
        async with client:
            agent = Agent(client, tools=[refund], store=SQLiteStore(db))
            async with serving(face(agent, session=picker(agent)), path) as url:
                yield url


def ask(text: str, run: str) -> dict[str, Any]:
    message = {"id": f"u-{run}", "role": "user", "content": text}
    return {"threadId": "shop", "runId": run, "messages": [message]}


PAUSE_THEN_ANSWER = [
    FakeReply(tool_calls=[FakeToolCall("refund", {"order": "A-1"}, id="call_r1")]),
    FakeReply("You are welcome."),
]


async def test_agui_new_message_after_the_cli_approved_elsewhere(tmp_path: Path) -> None:
    REFUNDS.clear()
    db = tmp_path / "shop.db"
    async with worker(db, PAUSE_THEN_ANSWER, AGUIApp, "/agent") as url:
        _, paused, _ = await post(url, ask("refund A-1", "r1"))
        assert paused[-1]["outcome"]["type"] == "interrupt"
        await asyncio.to_thread(approve_elsewhere, db, "shop")  # its own loop, as a process
        _, after, _ = await post(url, ask("thanks", "r2"))
    assert after[-1]["type"] == "RUN_FINISHED", after[-1]
    assert after[-1]["result"] == "You are welcome."
    assert REFUNDS == ["A-1"]  # approved once, run once


async def test_agui_answer_reaches_a_worker_that_cached_the_thread_before_it_paused(
    tmp_path: Path,
) -> None:
    REFUNDS.clear()
    db = tmp_path / "shop.db"
    first_script = [FakeReply("Hello."), FakeReply("Refunded.")]
    async with worker(db, first_script, AGUIApp, "/agent") as first:
        _, hello, _ = await post(first, ask("hi", "r1"))  # worker 1 now holds the thread, idle
        assert hello[-1]["result"] == "Hello."
        async with worker(db, PAUSE_THEN_ANSWER[:1], AGUIApp, "/agent") as second:
            _, paused, _ = await post(second, ask("refund A-1", "r2"))
        assert paused[-1]["outcome"]["type"] == "interrupt"
        resume = [{"interruptId": "call_r1", "status": "resolved", "payload": {"approved": True}}]
        body = {"threadId": "shop", "runId": "r3", "messages": [], "resume": resume}
        _, answered, _ = await post(first, body)  # the load balancer picked worker 1
    assert answered[-1]["type"] == "RUN_FINISHED", answered[-1]
    assert answered[-1]["result"] == "Refunded."
    assert REFUNDS == ["A-1"]


async def test_vercel_new_message_after_the_cli_approved_elsewhere(tmp_path: Path) -> None:
    REFUNDS.clear()
    db = tmp_path / "shop.db"

    def chat(text: str, n: int) -> dict[str, Any]:
        message = {"id": f"u{n}", "role": "user", "parts": [{"type": "text", "text": text}]}
        return {"id": "shop", "messages": [message], "trigger": "submit-message"}

    async with worker(db, PAUSE_THEN_ANSWER, VercelAIApp, "/api/chat") as url:
        status, paused, _ = await post(url, chat("refund A-1", 1))
        assert status == 200 and "tool-approval-request" in [c["type"] for c in paused]
        await asyncio.to_thread(approve_elsewhere, db, "shop")
        status, after, text = await post(url, chat("thanks", 2))
    assert status == 200, text
    deltas = [c["delta"] for c in after if c["type"] == "text-delta"]
    assert "".join(deltas) == "You are welcome."
    assert REFUNDS == ["A-1"]


def test_a_live_session_runs_after_another_process_decided_its_paused_run(tmp_path: Path) -> None:
    REFUNDS.clear()
    db = tmp_path / "shop.db"
    web = Agent(
        ScriptedModel([call("refund", {"order": "A-1"}, id="c1"), reply("Welcome.")]),
        tools=[refund],
        store=SQLiteStore(db),
    )
    chat = web.session("shop")
    assert chat.run_sync("refund A-1").paused
    approve_elsewhere(db, "shop")
    try:
        run = chat.run_sync("thanks")
    except InvalidInput as error:  # today: "has a paused run ... waiting on 1 pending call(s)"
        pytest.fail(str(error))
    assert run.output == "Welcome." and REFUNDS == ["A-1"]


async def wait_paused(db: Path, thread: str) -> None:
    """Until the store holds the thread's run as paused (the page shows its interrupt)."""
    for _ in range(600):
        store = SQLiteStore(db)
        try:
            runs = store.load_runs(thread) if store.has_session(thread) else []
        finally:
            store.close()
        if runs and runs[-1].run.paused:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the run never paused")


async def test_the_ag_ui_client_is_not_stuck_on_an_interrupt_decided_elsewhere(
    tmp_path: Path,
) -> None:
    """``@ag-ui/client`` refuses a new message while it holds interrupts: the answer clears them.

    The customer's page answers (denies) after the operator approved elsewhere: it reads what
    happened (the approval's result, the run's answer), its own answer is not applied, its
    interrupts are gone, and its next message runs.
    """
    from tests.ui.test_ag_ui import NODE_DIR, node_or_skip

    node = node_or_skip()
    REFUNDS.clear()
    db, go = tmp_path / "shop.db", tmp_path / "operator-done"
    plan = {
        "threadId": "shop",
        "steps": [
            {"say": "refund A-1"},
            {"wait": str(go)},
            {"resume": {"approved": False, "message": "no"}},
            {"say": "thanks"},
        ],
    }
    async with worker(db, PAUSE_THEN_ANSWER, AGUIApp, "/agent") as url:
        client = await asyncio.create_subprocess_exec(
            node,
            str(NODE_DIR / "agui_run.mjs"),
            url,
            json.dumps(plan),
            cwd=NODE_DIR,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        await wait_paused(db, "shop")
        await asyncio.to_thread(approve_elsewhere, db, "shop")
        go.touch()
        out, err = await asyncio.wait_for(client.communicate(), 60)
    assert client.returncode == 0, err.decode()
    paused, answered, after = json.loads(out)["runs"]
    assert paused["outcome"] == "interrupt"
    assert answered["error"] is None and answered["outcome"] == "success", answered
    assert [(r["toolCallId"], r["content"]) for r in answered["results"]] == [
        ("call_r1", "refunded A-1")  # the operator's approval ran, the page's denial did not
    ]
    assert "CUSTOM" in answered["events"] and answered["interrupts"] == []
    assert after["error"] is None and after["outcome"] == "success", after
    assert REFUNDS == ["A-1"]


async def test_agui_resume_after_the_operator_cancelled_elsewhere(tmp_path: Path) -> None:
    """``agentloop runs cancel``: the page's answer reads the run's end, cancelled; nothing runs."""
    REFUNDS.clear()
    db = tmp_path / "shop.db"

    def cancel_elsewhere() -> None:
        store = SQLiteStore(db)
        try:
            other = Agent.resume("shop", store=store, client=ScriptedModel([]), tools=[refund])
            other.cancel_run_sync()
        finally:
            store.close()

    async with worker(db, PAUSE_THEN_ANSWER, AGUIApp, "/agent") as url:
        _, paused, _ = await post(url, ask("refund A-1", "r1"))
        assert paused[-1]["outcome"]["type"] == "interrupt"
        await asyncio.to_thread(cancel_elsewhere)
        resume = [{"interruptId": "call_r1", "status": "resolved", "payload": {"approved": True}}]
        body = {"threadId": "shop", "runId": "r2", "messages": [], "resume": resume}
        _, answered, _ = await post(url, body)
    assert answered[-1]["type"] == "RUN_FINISHED", answered[-1]
    assert answered[-1]["outcome"] == {"type": "cancelled"}
    assert REFUNDS == []


async def test_agui_resume_after_the_operator_decided_and_the_run_paused_again(
    tmp_path: Path,
) -> None:
    """The operator approved; the model asked for another refund: the page gets that interrupt."""
    REFUNDS.clear()
    db = tmp_path / "shop.db"

    def approve_then_pause_again() -> None:
        store = SQLiteStore(db)
        try:
            again = ScriptedModel([call("refund", {"order": "B-2"}, id="call_r2")])
            other = Agent.resume("shop", store=store, client=again, tools=[refund])
            assert other.continue_run_sync(decisions={"call_r1": Approve()}).paused
        finally:
            store.close()

    async with worker(db, PAUSE_THEN_ANSWER, AGUIApp, "/agent") as url:
        _, paused, _ = await post(url, ask("refund A-1", "r1"))
        assert paused[-1]["outcome"]["type"] == "interrupt"
        await asyncio.to_thread(approve_then_pause_again)
        resume = [{"interruptId": "call_r1", "status": "resolved", "payload": {"approved": False}}]
        body = {"threadId": "shop", "runId": "r2", "messages": [], "resume": resume}
        _, answered, _ = await post(url, body)
    finished = answered[-1]
    assert finished["type"] == "RUN_FINISHED", finished
    assert [i["id"] for i in finished["outcome"]["interrupts"]] == ["call_r2"]
    results = [e["content"] for e in answered if e["type"] == "TOOL_CALL_RESULT"]
    assert results == ["refunded A-1"] and REFUNDS == ["A-1"]


async def test_vercel_approval_after_the_operator_decided_elsewhere(tmp_path: Path) -> None:
    """The useChat page's approval reads what the operator's decision did, in its message."""
    from tests.ui.test_ag_ui import node_or_skip
    from tests.ui.test_vercel import NODE_DIR as VERCEL_NODE
    from tests.ui.test_vercel import SCRIPT

    node_or_skip()
    assert (VERCEL_NODE / "node_modules" / "ai").is_dir()
    REFUNDS.clear()
    db, go = tmp_path / "shop.db", tmp_path / "operator-done"
    async with worker(db, PAUSE_THEN_ANSWER, VercelAIApp, "/api/chat") as url:
        steps = [{"send": "refund A-1"}, {"wait": str(go)}, {"approve": True}]
        scenario = {"url": url, "chatId": "shop", "steps": steps}
        page = await asyncio.create_subprocess_exec(
            "node", str(SCRIPT), json.dumps(scenario), stdout=-1, stderr=-1
        )
        await wait_paused(db, "shop")
        await asyncio.to_thread(approve_elsewhere, db, "shop")
        go.touch()
        out, err = await asyncio.wait_for(page.communicate(), 60)
    assert page.returncode == 0, err.decode()
    seen = json.loads(out)
    assert seen["errors"] == []
    parts = seen["messages"][-1]["parts"]
    outputs = [p.get("output") for p in parts if p.get("state") == "output-available"]
    assert outputs == ["refunded A-1"] and REFUNDS == ["A-1"]
