"""Staged memory writes travel in the durable journal (SPEC 27, 14): a crash loses none.

A child process runs an agent with memory on a ``SQLiteStore`` and dies inside its second
turn. Nothing was written to memory (writes are staged); continued in this process, the run
ends and exactly the writes of its committed turns are applied, each once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentloop.memory import SQLiteMemoryStore

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import _memory_crash_child as child  # noqa: E402

NS = ("user", "ada")


async def test_a_crashed_run_s_staged_writes_survive_in_the_journal(tmp_path: Path) -> None:
    db, memory_db = tmp_path / "runs.db", tmp_path / "memory.db"
    env = {**os.environ, "DIE": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(HERE / "_memory_crash_child.py"), str(db), str(memory_db)],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 9, done.stderr.decode()
    store = SQLiteMemoryStore(memory_db)
    try:
        assert await store.count(NS) == 0  # staged only: the run never finished
        agent = child.build(str(db), str(memory_db), resume=True)
        run = await agent.continue_run()
        assert run.output == "done"
        assert sorted(i.text for i in await store.search(NS, "", k=10)) == ["one", "zero"]
        assert run.memory is not None and len(run.memory["committed"]["written"]) == 2
    finally:
        await store.aclose()
