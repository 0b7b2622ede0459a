"""An approval from a UI app is never spent on a tool the app's agent lacks (SPEC 17 amended).

A deploy whose agent lost the tool (renamed, or a worker built without it) serves the approval:
the AG-UI app answers ``RUN_ERROR`` ``InvalidInput`` naming the tool, the Vercel app a 4xx naming
it; nothing is recorded, the run stays paused, and an app whose agent has the tool completes it.
Both apps pick the session from one SQLite store (``session=``), as an application does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from agentloop import Agent, Session, tool
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import ScriptedModel, call
from agentloop.ui.ag_ui import AGUIApp
from agentloop.ui.vercel import VercelAIApp

LOCAL = "http://127.0.0.1"
ran: list[str] = []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    ran.append(order)
    return f"refunded {order}"


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return order


def agent_on(store: SQLiteStore, tools: list[Any], *steps: Any) -> Agent[Any]:
    return Agent(ScriptedModel(list(steps)), tools=tools, store=store)


def picker(agent: Agent[Any]) -> Any:
    def pick(request: object, thread_id: str) -> Session[Any]:
        return agent.session(thread_id)

    return pick


def events(text: str) -> list[dict[str, Any]]:
    lines = text.splitlines()
    return [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]


def paused_in(path: Path, thread: str) -> bool:
    with SQLiteStore(path) as store:
        run = Agent(ScriptedModel([]), store=store).session(thread).runs[-1]
        return run.paused


def test_ag_ui_refuses_an_approval_its_agent_cannot_run(tmp_path: Path) -> None:
    ran.clear()
    path = tmp_path / "runs.db"
    resume = [{"interruptId": "c1", "status": "resolved", "payload": {"approved": True}}]
    answer = {"threadId": "t", "runId": "r2", "messages": [], "resume": resume}
    with SQLiteStore(path) as store:
        first = agent_on(store, [refund], call("refund", {"order": "A1"}, id="c1"))
        ask = {
            "threadId": "t",
            "runId": "r1",
            "messages": [{"id": "u", "role": "user", "content": "go"}],
        }
        with TestClient(AGUIApp(first, session=picker(first)), base_url=LOCAL) as client:
            assert events(client.post("/", json=ask).text)[-1]["outcome"]["type"] == "interrupt"
    with SQLiteStore(path) as store:
        lacking = agent_on(store, [lookup], "Refunded.")
        with TestClient(AGUIApp(lacking, session=picker(lacking)), base_url=LOCAL) as client:
            refused = events(client.post("/", json=answer).text)
    assert refused[-1]["type"] == "RUN_ERROR" and refused[-1]["code"] == "InvalidInput"
    assert "refund" in refused[-1]["message"]
    assert ran == [] and paused_in(path, "t")
    with SQLiteStore(path) as store:
        having = agent_on(store, [refund], "Refunded.")
        with TestClient(AGUIApp(having, session=picker(having)), base_url=LOCAL) as client:
            done = events(client.post("/", json={**answer, "runId": "r3"}).text)
    assert ran == ["A1"] and done[-1]["outcome"] == {"type": "success"}


def approval(call_id: str) -> dict[str, Any]:
    part = {
        "type": "tool-refund",
        "toolCallId": call_id,
        "state": "approval-responded",
        "input": {"order": "A1"},
        "approval": {"id": call_id, "approved": True},
    }
    return {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}, part]}


def test_vercel_refuses_an_approval_its_agent_cannot_run(tmp_path: Path) -> None:
    ran.clear()
    path = tmp_path / "runs.db"
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    with SQLiteStore(path) as store:
        first = agent_on(store, [refund], call("refund", {"order": "A1"}, id="c1"))
        with TestClient(VercelAIApp(first, session=picker(first)), base_url=LOCAL) as client:
            paused = client.post("/", json={"id": "t", "messages": [user]})
            assert '"type":"tool-approval-request"' in paused.text
    body = {"id": "t", "messages": [user, approval("c1")]}
    with SQLiteStore(path) as store:
        lacking = agent_on(store, [lookup], "Refunded.")
        with TestClient(VercelAIApp(lacking, session=picker(lacking)), base_url=LOCAL) as client:
            refused = client.post("/", json=body)
    assert 400 <= refused.status_code < 500 and "refund" in refused.text
    assert ran == [] and paused_in(path, "t")
    with SQLiteStore(path) as store:
        having = agent_on(store, [refund], "Refunded.")
        with TestClient(VercelAIApp(having, session=picker(having)), base_url=LOCAL) as client:
            done = client.post("/", json=body)
    assert done.status_code == 200 and ran == ["A1"] and '"finishReason":"stop"' in done.text
