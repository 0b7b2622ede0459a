"""``agentloop runs cancel ID`` (SPEC 11, 17): a stored paused run ended from the command line.

The run pauses in this process on a real SQLite store; the command runs as a real subprocess
(``python -m agentloop``), as another process would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentloop import Agent, tool
from agentloop.errors import Cancelled
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.transcript import validate_transcript

REFUNDS: list[str] = []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    REFUNDS.append(order)
    return f"refunded {order}"


def agentloop(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "agentloop", *args],
        cwd=cwd,
        env=env | {"COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_runs_cancel_ends_a_paused_run_once(tmp_path: Path) -> None:
    path = tmp_path / "agentloop.db"
    agent = Agent(
        ScriptedModel([call("refund", {"order": "A1"}, id="c1")]),
        tools=[refund],
        store=SQLiteStore(path),
    )
    run = await agent.run("refund A1")
    assert run.paused
    shown = agentloop(tmp_path, "runs", "show", run.id).stdout
    assert f"agentloop runs cancel {run.id[:12]} --store agentloop.db" in shown
    done = agentloop(tmp_path, "runs", "cancel", run.id[:8])  # a unique prefix will do
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"cancelled run {run.id} (session {agent.session_id})"
    stored = SQLiteStore(path).load_run(run.id)
    assert stored is not None and not stored.run.paused
    assert isinstance(stored.run.stop_reason, Cancelled)
    assert "paused" not in agentloop(tmp_path, "runs").stdout

    again = agentloop(tmp_path, "runs", "cancel", run.id, "--store", str(path))
    assert again.returncode == 2
    assert f"run {run.id} is not paused or waiting (it ended with Cancelled)" in again.stderr

    model = ScriptedModel([reply("next one")])
    resumed = Agent.resume(agent.session_id, store=SQLiteStore(path), client=model)
    assert (await resumed.run("anything else?")).output == "next one"
    validate_transcript(model.requests[-1].messages)
    assert REFUNDS == []


async def test_runs_cancel_refuses_what_it_cannot_cancel(tmp_path: Path) -> None:
    missing = agentloop(tmp_path, "runs", "cancel", "abc")
    assert missing.returncode == 2 and "no store at 'agentloop.db'" in missing.stderr
    agent = Agent(ScriptedModel([reply("done")]), store=SQLiteStore(tmp_path / "agentloop.db"))
    run = await agent.run("hello")
    unknown = agentloop(tmp_path, "runs", "cancel", "zzzz")
    assert unknown.returncode == 2 and "no stored run with an id starting 'zzzz'" in unknown.stderr
    completed = agentloop(tmp_path, "runs", "cancel", run.id)
    assert completed.returncode == 2
    assert f"run {run.id} is not paused or waiting (it ended completed)" in completed.stderr
