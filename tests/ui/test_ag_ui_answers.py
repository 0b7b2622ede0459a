"""An AG-UI answer approves a call only with the JSON boolean ``true`` (SPEC 12: gates fail closed).

The Vercel app has this test (``test_vercel_input.py``: a boolean ``approved``); here the AG-UI
side: ``{"approved": "false"}``, ``"true"``, ``1`` or no ``approved`` at all is a RUN_ERROR
(``InvalidInput``), the tool never runs and the run stays paused for a proper answer; loosen
the ``is True`` (or ``is False``) checks of ``_ag_ui_input`` and these fail.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from agentloop import Agent, tool
from agentloop.testing import ScriptedModel, call
from agentloop.ui.ag_ui import AGUIApp


def events(text: str) -> list[dict[str, Any]]:
    lines = text.splitlines()
    return [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]


@pytest.mark.parametrize(
    "payload",
    [{"approved": "false"}, {"approved": "true"}, {"approved": 1}, {}, {"approved": None}],
    ids=["string-false", "string-true", "one", "missing", "null"],
)
def test_only_a_boolean_true_approves(payload: dict[str, Any]) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        ran.append(order)
        return f"refunded {order}"

    model = ScriptedModel([call("refund", {"order": "A1"}, id="c_refund"), "Refunded.", "Done."])
    app = AGUIApp(Agent(model, tools=[refund]))
    ask = {
        "threadId": "t",
        "runId": "r1",
        "messages": [{"id": "u", "role": "user", "content": "go"}],
    }
    resume = [{"interruptId": "c_refund", "status": "resolved", "payload": payload}]
    answer = {"threadId": "t", "runId": "r2", "messages": [], "resume": resume}
    with TestClient(app) as client:
        first = events(client.post("/", json=ask).text)
        assert first[-1]["outcome"]["type"] == "interrupt"
        second = events(client.post("/", json=answer).text)
        assert second[-1]["type"] == "RUN_ERROR" and second[-1]["code"] == "InvalidInput"
        assert "approved" in second[-1]["message"]
        assert ran == []  # nothing ran, and the run still waits for a proper answer
        resume[0]["payload"] = {"approved": True}
        third = events(client.post("/", json={**answer, "runId": "r3"}).text)
    assert ran == ["A1"] and third[-1]["outcome"] == {"type": "success"}
