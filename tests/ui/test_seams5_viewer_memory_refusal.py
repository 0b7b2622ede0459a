"""The viewer refuses before its redirect when its agent cannot keep a turn's memory (17 x 27).

The viewer continues a decided run in the background after redirecting to the run's page, so
a refusal there reaches nobody: the page must refuse first. A run whose paused turn wrote
long-term memory needs an agent with ``memory=`` to complete it (else the write is dropped);
``continue_run`` refuses one without, and now the viewer's own check does too: the decide POST
is refused (400, naming ``memory=``), nothing is recorded, and the run stays paused for a
viewer whose agent has the memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed")

from starlette.testclient import TestClient

from agentloop import Agent, tool
from agentloop.memory import Memory, SQLiteMemoryStore, by_session
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.ui.viewer import ViewerApp, agent_continuer

LOCAL = "http://127.0.0.1"


@tool(requires_approval=True)
def ship(order: str) -> str:
    """Ship an order."""
    return f"shipped {order}"


def test_the_viewer_refuses_before_its_redirect_when_its_agent_has_no_memory(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    memory = Memory(SQLiteMemoryStore(tmp_path / "memory.db"), namespace=by_session)
    steps: list[Any] = [[call("remember", {"text": "ships Fridays"}), call("ship", {"order": "A"})]]
    agent = Agent(ScriptedModel(steps), tools=[ship], store=store, memory=memory)
    run = agent.session("shop").run_sync("ship A")
    assert run.paused
    call_id = run.pending[0].id

    bare = Agent(ScriptedModel([reply("Shipped.")]), tools=[ship], store=store)
    app = ViewerApp(
        str(tmp_path / "runs.db"), allow_decisions=True, continuer=agent_continuer(bare)
    )
    try:
        with TestClient(app, base_url=LOCAL) as client:
            answer = client.post(
                f"/runs/{run.id}/decide",
                data={f"decision:{call_id}": "approve"},
                headers={"origin": LOCAL},
                follow_redirects=False,
            )
    finally:
        app.close()
    assert answer.status_code == 400 and "has no memory=" in answer.text
    stored = store.load_run(run.id)
    assert stored is not None and stored.run.paused and stored.run.decisions == []
