"""``agentloop runs`` at 80 columns: each run a line or two, a paused run's turn counted.

A long hard error is its class and its message's first line cut with an ellipsis (the whole
text is ``agentloop runs show ID``'s); a paused run counts the turn that asked for the calls.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentloop import Agent, tool
from agentloop.cli import main
from agentloop.errors import InternalError, ProviderUnavailable
from agentloop.model import ModelRequest
from agentloop.store import SQLiteStore
from agentloop.testing import FunctionModel, ScriptedModel, call

LONG = (
    "the provider answered 503 Service Unavailable for every attempt: upstream connect error "
    "or disconnect/reset before headers, reset reason: overflow; retried 3 times over 14 s, "
    "giving up; check the provider's status page or pass a FallbackClient"
)


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def buggy(request: ModelRequest) -> str:
    raise KeyError("sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c")


@pytest.fixture
def store_path(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "runs.db"
    store = SQLiteStore(str(path))
    down = Agent(ScriptedModel([ProviderUnavailable(LONG)]), store=store, session_id="outage")
    with pytest.raises(ProviderUnavailable):
        down.run_sync("Anyone there?")
    calls = [call("refund", {"order": f"A-{i}"}) for i in range(3)]
    asking = Agent(ScriptedModel([calls]), tools=[refund], store=store, session_id="support")
    paused = asking.run_sync("Refund three orders")
    bug = Agent(FunctionModel(buggy), store=store, session_id="bug")
    with pytest.raises(InternalError):
        bug.run_sync("go")
    store.close()
    ids = {"failed": down.runs[-1].id, "paused": paused.id, "bug": bug.runs[-1].id}
    return path, ids


def test_runs_keeps_each_run_to_two_lines_at_80_columns(
    store_path: tuple[Path, dict[str, str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    path, ids = store_path
    assert main(["runs", "--store", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    body = lines[3:-2]  # between the header's rule and the bottom rule, before "3 runs"
    starts = [i for i, line in enumerate(body) if not line.startswith("│         ")]
    rows = {
        body[i].split("│")[2].strip(): body[i:j]
        for i, j in zip(starts, [*starts[1:], len(body)], strict=True)
    }
    for run in ("failed", "bug"):
        row = rows[ids[run][:12]]
        assert len(row) == 2, row  # the class, then the message's first line cut
        assert row[1].rstrip(" │").endswith("…")
    assert "ProviderUnavailable" in rows[ids["failed"][:12]][0]
    assert "InternalError" in rows[ids["bug"][:12]][0]
    paused = rows[ids["paused"][:12]][0]
    assert "│ 1     │ 3     │" in paused  # the waiting turn and its three calls
    assert "paused" in paused and out.rstrip().endswith("3 runs")
    assert "sk-proj-4f9a" not in out


def test_runs_show_prints_the_whole_error_and_the_frames(
    store_path: tuple[Path, dict[str, str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    path, ids = store_path
    assert main(["runs", "--store", str(path), "show", ids["failed"]]) == 0
    assert LONG in re.sub(r"[│\s]+", " ", capsys.readouterr().out)  # whole, once unwrapped
    assert main(["runs", "--store", str(path), "show", ids["bug"]]) == 0
    out = capsys.readouterr().out
    assert "traceback" in out and "test_cli_runs_display.py" in out and " in buggy: raise " in out
    assert "sk-proj-4f9a" not in out
    assert main(["runs", "--store", str(path), "show", ids["paused"]]) == 0
    out = capsys.readouterr().out
    assert "1 (3 tool calls; turn 0 waits on a decision)" in out
    assert "turn 0 (scripted): 3 tool calls (paused: waits on a decision)" in out
