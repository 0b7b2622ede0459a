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
from agentloop.toolsets import DynamicToolset
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


WIPED: list[str] = []
MADE: list[str] = []


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Wipe a path."""
    WIPED.append(path)
    return f"wiped {path}"


def admins_only(ctx: Any) -> list[Any]:
    return [wipe] if (ctx.deps or {}).get("admin") else []


def test_the_viewer_judges_toolsets_with_its_deps_before_its_redirect(tmp_path: Path) -> None:
    """Before: a 303, the background continue refused where nobody saw it, the page just paused.

    Now the toolsets resolve with the viewer's deps in its check (the factory called once, the
    continue using what it made): 400 naming the tool and the deps, nothing recorded.
    """
    WIPED.clear()
    store = SQLiteStore(tmp_path / "runs.db")
    tools = [DynamicToolset(admins_only)]
    agent = Agent(ScriptedModel([call("wipe", {"path": "/a"})]), toolsets=tools, store=store)
    run = agent.session("ops").run_sync("wipe /a", deps={"admin": True})
    call_id = run.pending[0].id

    def decide(admin: bool) -> Any:
        def deps(run: Any) -> dict[str, bool]:
            MADE.append(run.id)
            return {"admin": admin}

        viewer = Agent(ScriptedModel([reply("Wiped.")]), toolsets=tools, store=store)
        app = ViewerApp(
            str(tmp_path / "runs.db"),
            allow_decisions=True,
            continuer=agent_continuer(viewer, deps=deps),
        )
        try:
            with TestClient(app, base_url=LOCAL) as client:
                return client.post(
                    f"/runs/{run.id}/decide",
                    data={f"decision:{call_id}": "approve"},
                    headers={"origin": LOCAL},
                    follow_redirects=False,
                )
        finally:
            app.close()

    refused = decide(admin=False)
    assert refused.status_code == 400 and "tool &#x27;wipe&#x27;" in refused.text
    assert "deps of type dict" in refused.text
    stored = store.load_run(run.id)
    assert stored is not None and stored.run.paused and stored.run.decisions == []

    MADE.clear()
    assert decide(admin=True).status_code == 303
    stored = store.load_run(run.id)
    assert stored is not None and not stored.run.paused and WIPED == ["/a"] and MADE == [run.id]
