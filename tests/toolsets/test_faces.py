"""``agentloop runs show`` lists the tools a run loaded and the skills it read (SPEC 22)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent
from agentloop.cli import main
from agentloop.skills import SkillSet
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import FunctionToolset


def lookup_order(order: str) -> str:
    """Look an order up."""
    return f"order {order}"


def test_runs_show_lists_loaded_tools_and_skills_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    folder = tmp_path / "skills" / "refunds"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: refunds\ndescription: How to refund.\n---\nBe kind."
    )
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    model = ScriptedModel(
        [call("load_skill", {"name": "refunds"}), call("lookup_order", {"order": "7"}), reply("ok")]
    )
    orders = FunctionToolset([lookup_order], name="orders").deferred()
    agent = Agent(model, toolsets=[orders, SkillSet(tmp_path / "skills")], store=store)
    run = agent.run_sync("refund order 7")
    store.close()
    assert main(["runs", "--store", str(db), "show", run.id]) == 0
    out = capsys.readouterr().out
    assert "tools loaded" in out and "lookup_order" in out
    assert "skills read" in out and "refunds" in out


def test_the_viewer_lists_loaded_tools_and_skills_read(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from agentloop.ui.viewer import ViewerApp

    folder = tmp_path / "skills" / "refunds"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: refunds\ndescription: How to refund.\n---\nBe kind."
    )
    db = tmp_path / "runs.db"
    with SQLiteStore(db) as store:
        model = ScriptedModel(
            [
                call("load_skill", {"name": "refunds"}),
                call("lookup_order", {"order": "7"}),
                reply("ok"),
            ]
        )
        orders = FunctionToolset([lookup_order], name="orders").deferred()
        agent = Agent(model, toolsets=[orders, SkillSet(tmp_path / "skills")], store=store)
        run = agent.run_sync("refund order 7")
    app = ViewerApp(str(db), poll_seconds=0.01)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{run.id}").text
    app.close()
    assert "<dt>tools loaded</dt><dd>lookup_order</dd>" in page
    assert "<dt>skills read</dt><dd>refunds</dd>" in page
