"""The run viewer shows a run's recalled and committed memory ids (SPEC 27)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the viewer needs the ui extra")

from starlette.testclient import TestClient

from agentloop import Agent
from agentloop.memory import Memory, SQLiteMemoryStore
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.ui.viewer import ViewerApp

LOCAL = "http://127.0.0.1"


def test_the_run_page_shows_recalled_and_committed_ids(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"

    async def go() -> tuple[str, str, str]:
        memory_store = SQLiteMemoryStore(path)  # beside the runs tables, in the same file
        old = await memory_store.put(("user", "ada"), "Ada prefers green tea")
        store = SQLiteStore(path)
        model = ScriptedModel([call("remember", {"text": "Ada's cat is Pixel"}), reply("ok")])
        memory = Memory(memory_store, namespace=lambda ctx: ("user", "ada"), auto_recall=3)
        agent = Agent(model, memory=memory, store=store, session_id="s")
        run = await agent.run("which tea?")
        store.close()
        await memory_store.aclose()
        assert run.memory is not None
        return run.id, old.id, run.memory["committed"]["written"][0]

    run_id, recalled, written = asyncio.run(go())
    app = ViewerApp(str(path), poll_seconds=0.01)
    try:
        with TestClient(app, base_url=LOCAL) as client:
            html = client.get(f"/runs/{run_id}").text
    finally:
        app.close()
    assert 'id="run-memory"' in html and "namespace user/ada" in html
    assert f'memory-recalled"><code>{recalled}</code>' in html
    assert f'memory-written"><code>{written}</code>' in html
