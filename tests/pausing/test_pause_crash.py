"""At most once across processes (SPEC 17): pause in A, decide in B (SIGKILLed), continue in C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentloop.pausing import LOST_TEXT

CHILD = Path(__file__).with_name("_child.py")


def _run(db: Path, mode: str, effects: Path, kill: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EFFECTS": str(effects), "KILL": kill}
    return subprocess.run(
        [sys.executable, str(CHILD), str(db), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("kill", "reads"),
    [
        ("in_tool", LOST_TEXT),  # it started and never returned: not run again
        ("after_tool", LOST_TEXT),  # it returned, the process died before the result was kept
        ("after_turn", "refunded A1"),  # the result was kept: the model reads it
    ],
)
def test_an_approved_call_runs_once_whatever_process_dies(
    tmp_path: Path, kill: str, reads: str
) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects"
    paused = _run(db, "pause", effects)
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout) == ["c1"]

    deciding = _run(db, "decide", effects, kill=kill)
    assert deciding.returncode == -signal.SIGKILL, deciding.stderr
    assert effects.read_text().split("\n")[:-1] == ["refund A1"]

    again = _run(db, "decide", effects)  # the same decisions again: already decided
    assert again.returncode != 0 and "already decided" in again.stderr

    continued = _run(db, "continue", effects)
    assert continued.returncode == 0, continued.stderr
    result = json.loads(continued.stdout)
    assert result["output"] == "done" and result["read"] == [reads]
    assert effects.read_text().split("\n")[:-1] == ["refund A1"]  # exactly once

    finished = _run(db, "continue", effects)  # nothing left to continue
    assert finished.returncode != 0 and "InvalidInput" in finished.stderr
    assert effects.read_text().split("\n")[:-1] == ["refund A1"]


def test_two_processes_deciding_at_once_one_wins_and_nothing_runs_twice(tmp_path: Path) -> None:
    db, effects, hold = tmp_path / "runs.db", tmp_path / "effects", tmp_path / "hold"
    assert _run(db, "pause", effects).returncode == 0
    env = {**os.environ, "EFFECTS": str(effects), "KILL": "", "HOLD": str(hold)}
    first = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), "decide"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not effects.exists():  # the first process's approved call is running
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.02)
        second = _run(db, "decide", effects)
        assert second.returncode != 0
        assert "being run by another process" in second.stderr, second.stderr[-2000:]
    finally:
        hold.touch()
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert json.loads(out) == {"output": "done", "read": ["refunded A1"]}
    late = _run(db, "decide", effects)  # after the first finished: the run is not paused
    assert late.returncode != 0 and "is not paused" in late.stderr
    assert effects.read_text().split("\n")[:-1] == ["refund A1"]  # exactly once
