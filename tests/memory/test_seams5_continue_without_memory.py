"""A paused turn's memory writes are never dropped by a continuation without memory (17 x 27).

The paused turn wrote a memory (``remember`` ran beside the call that waits for a person); its
write is staged on the run until ``continue_run`` completes the turn (SPEC 27). Before, a
process whose agent was built without ``memory=`` (a worker, a face, a CLI) continued the run,
completed it, and dropped the write: the model had read ``remembered as <id>`` and the memory
was never stored. Now that continuation is refused before anything is recorded
(``InvalidInput`` naming ``memory=``), the run stays paused, and an agent with the memory
continues it: the approved call runs once and the write is applied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Approve, Deny, tool
from agentloop.errors import InvalidInput
from agentloop.memory import Memory, SQLiteMemoryStore, by_session
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

SHIPPED: list[str] = []


@tool(requires_approval=True)
def ship(order: str) -> str:
    """Ship an order."""
    SHIPPED.append(order)
    return f"shipped {order}"


def memory(path: Path) -> Memory:
    return Memory(SQLiteMemoryStore(path / "memory.db"), namespace=by_session)


async def paused(tmp_path: Path, store: SQLiteStore) -> Any:
    steps = [
        [
            call("remember", {"text": "ships on Fridays"}, id="m1"),
            call("ship", {"order": "A"}, id="c1"),
        ]
    ]
    agent = Agent(
        ScriptedModel(steps), tools=[ship], store=store, session_id="s1", memory=memory(tmp_path)
    )
    run = await agent.run("go")
    assert run.paused and [p.call.name for p in run.pending] == ["ship"]
    return run


@pytest.mark.usefixtures("no_real_sleep")
@pytest.mark.parametrize("decision", [Approve(), Deny()])
async def test_a_continuation_without_memory_is_refused_and_the_write_survives(
    tmp_path: Path, decision: Any
) -> None:
    SHIPPED.clear()
    store = SQLiteStore(tmp_path / "runs.db")
    run = await paused(tmp_path, store)

    bare = Agent.resume("s1", store=store, client=ScriptedModel([reply("done")]), tools=[ship])
    with pytest.raises(InvalidInput, match=r"memory=") as refused:
        await bare.continue_run(decisions={"c1": decision})
    assert run.id in str(refused.value)
    stored = store.load_run(run.id)
    assert stored is not None and stored.run.paused and stored.run.decisions == []
    assert SHIPPED == []

    kept = memory(tmp_path)
    worker = Agent.resume(
        "s1", store=store, client=ScriptedModel([reply("done")]), tools=[ship], memory=kept
    )
    done = await worker.continue_run(decisions={"c1": decision})
    assert done.id == run.id and done.output == "done"
    assert SHIPPED == (["A"] if isinstance(decision, Approve) else [])
    found = await kept.store.search(("session", "s1"))
    assert [item.text for item in found] == ["ships on Fridays"]


TOOLS = '''
from agentloop import tool


@tool(requires_approval=True)
def ship(order: str) -> str:
    """Ship an order."""
    return f"shipped {order}"
'''


def test_agentloop_continue_names_the_app_agent_and_records_nothing(tmp_path: Path) -> None:
    import asyncio
    import os
    import subprocess
    import sys

    store = SQLiteStore(tmp_path / "runs.db")
    run = asyncio.run(paused(tmp_path, store))
    (tmp_path / "shipping.py").write_text(TOOLS)
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "PYTHONPATH": os.pathsep.join(sys.path)}
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    argv = [
        sys.executable,
        "-m",
        "agentloop",
        "continue",
        run.id,
        "--store",
        str(tmp_path / "runs.db"),
    ]
    argv += ["--approve", "c1", "--tools", "shipping:ship", "--provider", "openai", "--plain"]
    argv += ["--base-url", "http://127.0.0.1:9/v1"]  # never reached: refused before any request
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "has no memory=" in done.stderr and "--agent MODULE:NAME" in done.stderr
    stored = store.load_run(run.id)
    assert stored is not None and stored.run.paused and stored.run.decisions == []


def with_child(tmp_path: Path, store: SQLiteStore, *steps: Any, child_memory: bool) -> Agent[Any]:
    """A parent whose child agent (as a tool) has memory, or (another deploy) none."""
    kept = memory(tmp_path) if child_memory else None
    child_steps = list(steps) or [reply("child done")]
    child = Agent(ScriptedModel(child_steps), tools=[ship], name="shipping", memory=kept)
    tools = [child.as_tool(name="shipping", description="Ships orders.")]
    if steps:
        parent = ScriptedModel([call("shipping", {"input": "ship A"}), reply("done")])
        return Agent(parent, tools=tools, store=store, session_id="s1")
    return Agent.resume("s1", store=store, client=ScriptedModel([reply("done")]), tools=tools)


@pytest.mark.usefixtures("no_real_sleep")
async def test_a_child_agent_without_memory_is_refused_before_the_parent_records(
    tmp_path: Path,
) -> None:
    """Before: the parent's decision was recorded, the child refused, the parent's call read
    ``Tool "shipping" panicked: InvalidInput: ...`` and the approved call was lost."""
    SHIPPED.clear()
    store = SQLiteStore(tmp_path / "runs.db")
    first = [
        call("remember", {"text": "ships on Fridays"}, id="m1"),
        call("ship", {"order": "A"}, id="c1"),
    ]
    run = await with_child(tmp_path, store, first, reply("child done"), child_memory=True).run("go")
    assert run.paused and [p.path for p in run.pending] == [("shipping",)]

    bare = with_child(tmp_path, store, child_memory=False)
    with pytest.raises(InvalidInput, match=r"agent 'shipping' continuing it has no memory="):
        await bare.continue_run(decisions={"c1": Approve()})
    stored = store.load_run(run.id)
    assert stored is not None and stored.run.paused and stored.run.decisions == []

    done = await with_child(tmp_path, store, child_memory=True).continue_run(
        decisions={"c1": Approve()}
    )
    assert done.output == "done" and SHIPPED == ["A"]
    spaces = await memory(tmp_path).store.namespaces()
    assert len(spaces) == 1
