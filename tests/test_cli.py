"""The command line: the demo runs end to end; bad fault names are rejected; runs show."""

import argparse
from pathlib import Path

import pytest

from agentloop.cli import _fault_list, main


def test_demo_runs_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "src/main.rs prints hello." in out
    assert "tool 'read_fille' is not available. Did you mean 'read_file'?" in out
    assert "contains '..'" in out
    assert "LoopDetected" in out
    assert "backup model answered." in out
    assert "run records" in out


def test_fault_names() -> None:
    assert _fault_list("rate-limit, reset") == ["rate_limit", "reset"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown fault"):
        _fault_list("explode")


# --- runs show: every tool call's arguments and every soft error's text, literally -----------


@pytest.fixture
def stored_run(tmp_path: Path) -> tuple[Path, str]:
    from agentloop import Agent, ToolError, tool
    from agentloop.store import SQLiteStore
    from agentloop.testing import ScriptedModel, call, reply

    @tool
    def read_file(path: str) -> str:
        """Read a UTF-8 text file."""
        if path != "src/main.rs":
            raise ToolError(f"file {path} not found; [bold]no[/bold] such file. " + "x" * 90)
        return "fn main() {}\nmore"

    db = tmp_path / "runs.db"
    store = SQLiteStore(str(db))
    model = ScriptedModel(
        [
            [
                "Looking at [red]list[int][/red].",
                call("read_file", {"path": "src/[mian].rs"}),
                call("raed_file", {"path": "a"}),
            ],
            call("read_file", {"path": "src/main.rs"}),
            reply("done: list[int] [bold]x[/]"),
        ]
    )
    agent = Agent(model, tools=[read_file], store=store, session_id="s")
    run = agent.run_sync("explain list[int] [bold]now[/]")
    store.close()
    return db, run.id


def test_runs_show_prints_arguments_and_soft_errors_literally(
    stored_run: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    db, run_id = stored_run
    assert main(["runs", "--store", str(db), "show", run_id[:8]]) == 0
    out = capsys.readouterr().out
    flat = " ".join(line.strip() for line in out.splitlines())  # undo the wrapping at 80
    assert "turn 0 (scripted): 2 tool calls, 2 soft errors" in out
    assert "says: Looking at [red]list[int][/red]." in out
    assert 'call read_file {"path": "src/[mian].rs"}' in out
    assert 'call raed_file {"path": "a"}' in out
    assert "soft error: file src/[mian].rs not found; [bold]no[/bold] such file. " in flat
    assert "x" * 90 in flat.replace(" ", "")  # the whole text, not a preview
    assert "soft error: tool 'raed_file' is not available. Did you mean 'read_file'?" in flat
    assert "ok: fn main() {} …" in out
    assert "'explain list[int] [bold]now[/]'" in out
    assert "done: list[int] [bold]x[/]" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert not [line for line in out.splitlines() if line != line.rstrip()]


def test_runs_list_fits_80_columns(
    stored_run: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    db, run_id = stored_run
    assert main(["runs", "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert run_id[:12] in out and out.rstrip().endswith("1 run")
    assert max(len(line) for line in out.splitlines()) <= 80


def test_attempt_log_waits_are_rounded() -> None:
    from agentloop.cli import _attempt
    from agentloop.errors import AttemptRecord

    record = AttemptRecord(2, "RateLimited", 429, None, True, 0.123456, 1.23456)
    assert _attempt(record) == (
        "#2 RateLimited status=429 phase=- sent=True took 0.12s, then waited 1.2s"
    )
    last = AttemptRecord(3, "ServerError", 503, None, True, 12.5, 0.0)
    assert _attempt(last).endswith("took 12s")
