"""A batch run's stored status (SPEC 9, 25): ``waiting`` with its ids, found by one query.

Real HTTP against the fake server's batch API, real SQLite: the status column follows the run
(waiting, then completed; a waiting run ended as ``Cancelled`` is failed), ``poll`` finds
the waiting runs by that column (a damaged record of another run no longer stops it), and
``agentloop runs --status waiting`` / ``runs show`` print them through the entry point.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentloop import Agent, RunConfig
from agentloop.batch import poll
from agentloop.cli import main
from agentloop.errors import Cancelled
from agentloop.providers.openai import OpenAIClient
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer, FakeReply, ScriptedModel

pytestmark = pytest.mark.usefixtures("no_real_sleep")


def batch_agent(server: FakeProviderServer, path: Path) -> Agent[str | None]:
    client = OpenAIClient("gpt-test", api_key="sk-test", base_url=server.base_url)
    return Agent(client, store=SQLiteStore(path), config=RunConfig(batch=True))


def columns(path: Path, run_id: str) -> tuple[str, str | None, str | None]:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT status, batch_id, request_id FROM agentloop_runs WHERE run_id = ?", (run_id,)
        ).fetchone()
    return row[0], row[1], row[2]


async def test_a_waiting_run_is_stored_waiting_with_its_ids_then_completed(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    async with FakeProviderServer([FakeReply("done")]) as server:
        agent = batch_agent(server, db)
        run = await agent.run("go")
        assert run.waiting is not None
        assert columns(db, run.id) == ("waiting", run.waiting.batch_id, run.waiting.request_id)
        other = Agent(ScriptedModel(["x"]), store=SQLiteStore(db), session_id="other")
        plain = await other.run("plain")
        assert columns(db, plain.id) == ("completed", None, None)
        with sqlite3.connect(db) as conn:  # a damaged record of a run that does not wait
            conn.execute("UPDATE agentloop_runs SET record = '{' WHERE run_id = ?", (plain.id,))
        report = await poll(agent)
        assert report.continued == [run.id] and not report.failed
        await agent.aclose()
    assert columns(db, run.id) == ("completed", None, None)


async def test_a_waiting_run_ended_as_cancelled_is_failed(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with FakeProviderServer([FakeReply("never")]) as server:
        agent = batch_agent(server, db)
        run = await agent.run("go")
        await agent.aclose()
    store = SQLiteStore(db)
    run.waiting, run.paused_turn, run.stop_reason = None, None, Cancelled()
    store.finish_runs(run.session_id, [run], keep=0, append=[])  # what cancel_run records
    assert columns(db, run.id) == ("failed", None, None)
    stored = store.load_run(run.id)
    assert stored is not None and isinstance(stored.run.stop_reason, Cancelled)
    assert stored.status == "failed"
    assert store.load_runs(status="waiting") == []


async def test_runs_status_waiting_and_runs_show_print_the_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    db = tmp_path / "s.db"
    async with FakeProviderServer([FakeReply("done")]) as server:
        agent = batch_agent(server, db)
        run = await agent.run("go")
        await agent.aclose()
    assert run.waiting is not None
    await Agent(ScriptedModel(["x"]), store=SQLiteStore(db), session_id="other").run("plain")
    capsys.readouterr()
    assert main(["runs", "--store", str(db), "--status", "waiting"]) == 0
    out = capsys.readouterr().out
    assert run.id[:12] in out and "other" not in out and "1 run" in out
    assert main(["runs", "--store", str(db), "--status", "completed"]) == 0
    out = capsys.readouterr().out
    assert run.id[:12] not in out and "other" in out
    assert main(["runs", "show", run.id, "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"waiting (batch {run.waiting.batch_id})" in out


def test_an_unknown_status_is_a_usage_error_naming_the_five(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    SQLiteStore(tmp_path / "s.db").close()
    with pytest.raises(SystemExit) as exit_:
        main(["runs", "--store", str(tmp_path / "s.db"), "--status", "cancelled"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "'running', 'waiting', 'paused', 'completed', 'failed'" in err
