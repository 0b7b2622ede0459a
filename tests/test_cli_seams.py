"""``agentloop runs`` / ``runs show`` (SPEC 11) on runs of the newest features, as a subprocess.

A run that handed off shows which agent ruled each turn; a batch turn says so; a run paused in a
receiver lists its call and how to continue. Whatever was stored (a tool's result, the model's
text, an error's message) reaches the terminal with secrets redacted and control characters
shown, never obeyed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentloop import Agent, tool
from agentloop.errors import ProviderUnavailable
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

KEY = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"


@tool
def read_env(name: str) -> str:
    """Read a settings file (it holds a key and a terminal escape)."""
    return f"OPENAI_API_KEY={KEY}\x1b]52;c;Y2xpcA==\x07 loaded {name}"


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def agentloop(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, dict[str, str]]:
    path = tmp_path / "runs.db"
    db = SQLiteStore(str(path))
    billing = Agent(
        ScriptedModel([call("read_env", {"name": ".env"}), reply(f"done \x1b[2J with {KEY}")]),
        name="billing",
        tools=[read_env],
    )
    starter = ScriptedModel([call("transfer_to_billing", {})])
    handed = Agent(starter, handoffs=[billing], store=db, session_id="handed").run_sync("go")
    receiver = Agent(
        ScriptedModel([call("refund", {"order": "o-1"}, id="c1")]), name="billing", tools=[refund]
    )
    paused_agent = Agent(
        ScriptedModel([call("transfer_to_billing", {})]),
        handoffs=[receiver],
        store=db,
        session_id="paused",
    )
    paused = paused_agent.run_sync("refund o-1")
    failing = Agent(
        ScriptedModel([ProviderUnavailable(f"upstream said token={KEY}")]),
        store=db,
        session_id="failed",
    )
    with pytest.raises(ProviderUnavailable):
        failing.run_sync("hello")
    db.close()
    return str(path), {"handed": handed.id, "paused": paused.id, "failed": failing.runs[-1].id}


def test_what_the_terminal_shows_of_stored_runs(store: tuple[str, dict[str, str]]) -> None:
    path, ids = store
    outputs = [agentloop("runs", "--store", path)]
    outputs += [agentloop("runs", "--store", path, "show", run_id) for run_id in ids.values()]
    for shown in outputs:
        assert KEY not in shown and "\x1b" not in shown and "\x07" not in shown
    listing, handed, paused, failed = outputs
    assert "ProviderUnavailable" in listing and "[REDACTED]" in listing
    assert "turn 0 (scripted): 1 tool call" in handed
    assert "turn 1 (scripted, agent billing): 1 tool call" in handed
    assert "turn 2 (scripted, agent billing): 0 tool calls" in handed
    assert "OPENAI_API_KEY=[REDACTED]" in handed and "\\x1b]52;c;" in handed
    assert "says: done \\x1b[2J with [REDACTED]" in handed
    assert "turn 1 (scripted, agent billing): 1 tool call (paused: waits on a decision)" in paused
    assert "c1  refund  approval" in paused and "--approve c1" in paused
    assert "token=[REDACTED]" in failed
