"""Staged memory writes travel in the durable journal (SPEC 27, 14): a crash loses none.

A child process runs an agent with memory on a ``SQLiteStore`` and dies inside its second
turn. Nothing was written to memory (writes are staged); continued in this process, the run
ends and exactly the writes of its committed turns are applied, each once.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from agentloop.memory import SQLiteMemoryStore

HERE = Path(__file__).parent


def _child() -> Any:
    spec = importlib.util.spec_from_file_location(
        "memory_crash_child", HERE / "_memory_crash_child.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NS = ("user", "ada")


async def test_a_crashed_run_s_staged_writes_survive_in_the_journal(tmp_path: Path) -> None:
    db, memory_db = tmp_path / "runs.db", tmp_path / "memory.db"
    env = {**os.environ, "DIE": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "_memory_crash_child.py"),
        str(db),
        str(memory_db),
        env=env,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 9, err.decode()
    store = SQLiteMemoryStore(memory_db)
    try:
        assert await store.count(NS) == 0  # staged only: the run never finished
        agent = _child().build(str(db), str(memory_db), resume=True)
        run = await agent.continue_run()
        assert run.output == "done"
        assert sorted(i.text for i in await store.search(NS, "", k=10)) == ["one", "zero"]
        assert run.memory is not None and len(run.memory["committed"]["written"]) == 2
    finally:
        await store.aclose()


async def test_a_paused_run_s_staged_write_survives_in_the_store_for_another_agent(
    tmp_path: Path,
) -> None:
    from agentloop import Agent, tool
    from agentloop.memory import Memory
    from agentloop.pausing import Approve
    from agentloop.store import SQLiteStore
    from agentloop.testing import ScriptedModel, call, reply

    @tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    memory_store = SQLiteMemoryStore(tmp_path / "memory.db")
    memory = Memory(memory_store, namespace=lambda ctx: NS)
    steps = [[call("remember", {"text": "paused fact"}), call("refund", {"order": "A"}, id="c1")]]
    first = Agent(
        ScriptedModel(steps),
        tools=[refund],
        memory=memory,
        store=SQLiteStore(tmp_path / "runs.db"),
        session_id="s",
    )
    assert (await first.run("go")).paused
    assert await memory_store.count(NS) == 0  # the paused turn's write waits for its turn
    again = Agent.resume(
        "s",
        store=SQLiteStore(tmp_path / "runs.db"),
        client=ScriptedModel([reply("done")]),
        tools=[refund],
        memory=memory,
    )
    run = await again.continue_run(decisions={"c1": Approve()})
    assert run.output == "done"
    assert [i.text for i in await memory_store.search(NS, "")] == ["paused fact"]
    await memory_store.aclose()
