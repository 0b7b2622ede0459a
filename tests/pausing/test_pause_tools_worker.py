"""A worker process without the approved call's tool refuses it; one with it completes the run.

The same SQLite store across three processes (SPEC 17: an approval is never spent on nothing).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agentloop.store import SQLiteStore

WORKER = Path(__file__).with_name("_worker.py")


def _worker(db: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKER), str(db), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_worker_process_without_the_tool_leaves_the_run_for_one_that_has_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    first = _worker(db, "pause")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == ["c1"]

    bare = _worker(db, "decide-bare")
    assert bare.returncode == 3, bare.stderr
    assert "tool 'refund'" in json.loads(bare.stdout)["refused"]
    store = SQLiteStore(db)
    (stored,) = store.load_runs("s1")
    store.close()
    assert stored.run.paused and stored.run.decisions == []
    with_tool = _worker(db, "decide")
    assert with_tool.returncode == 0, with_tool.stderr
    assert json.loads(with_tool.stdout) == {
        "output": "Refunded",
        "result": "refunded A1 via db-for-s1",
    }
