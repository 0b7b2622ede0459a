"""A hook's ``Ask`` on ``search_tools`` can be approved, and what it finds is loaded (17 x 22).

An application that asks a person before every call (a hook returning ``Ask`` for each, with
``RunConfig(headless=False)``) pauses on the engine's own ``search_tools`` too. Before, the
approval was refused in every process (``'search_tools', which the agent continuing the run
does not have``) though the continuation offers it: the run could only be denied. And once
approved, the tools it found were not offered on the next request (the continuation's first
offer was reused), so the model's call to one read ``was not loaded``. Now the approved search
runs once, its tools are offered from the next step, in this process or another on the store;
an agent without tool search still refuses the approval, naming the tool, nothing recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Approve, RunConfig, tool
from agentloop.errors import InvalidInput
from agentloop.hooks import Ask, Hook
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

pytestmark = pytest.mark.usefixtures("no_real_sleep")

LOOKED: list[str] = []
FOUND = "tools found: 1; callable from your next step:\n- lookup: Look an order up."


@tool(defer_loading=True)
def lookup(order: str) -> str:
    """Look an order up."""
    LOOKED.append(order)
    return f"order {order}"


class AskFirst(Hook):
    """Asks a person about every call but the looked-up tool's."""

    async def pre_tool(self, call: Any, ctx: Any) -> Ask | None:
        return None if call.name == "lookup" else Ask(f"may I call {call.name}?")


SEARCHING = RunConfig(headless=False, tool_search="local")


def agent(*steps: Any, tools: Any = (lookup,), **kw: Any) -> Agent[Any]:
    model = ScriptedModel(list(steps))
    config = kw.pop("config", SEARCHING)
    return Agent(model, tools=list(tools), hooks=[AskFirst()], config=config, **kw)


def results(run: Any) -> list[tuple[str, str]]:
    return [(r.name, r.content) for m in run.messages for r in m.tool_results_parts]


async def test_an_approved_search_runs_and_its_tool_is_offered_next(tmp_path: Path) -> None:
    LOOKED.clear()
    store = SQLiteStore(tmp_path / "runs.db")
    steps = [call("search_tools", {"query": "order"}, id="c1"), call("lookup", {"order": "7"})]
    first = agent(*steps, reply("done"), store=store, session_id="s1")
    run = await first.run("go")
    assert run.paused and [p.call.name for p in run.pending] == ["search_tools"]

    done = await first.continue_run(decisions={"c1": Approve()})
    assert done.output == "done" and LOOKED == ["7"]
    assert results(done) == [("search_tools", FOUND), ("lookup", "order 7")]
    assert done.loaded_tools == ["lookup"]


async def test_another_process_approves_the_search(tmp_path: Path) -> None:
    LOOKED.clear()
    store = SQLiteStore(tmp_path / "runs.db")
    paused = agent(call("search_tools", {"query": "order"}, id="c1"), store=store, session_id="s1")
    run = await paused.run("go")
    assert run.paused
    worker = Agent.resume(
        "s1",
        store=store,
        client=ScriptedModel([call("lookup", {"order": "8"}), reply("done")]),
        tools=[lookup],
        hooks=[AskFirst()],
        config=SEARCHING,
    )
    done = await worker.continue_run(decisions={"c1": Approve()})
    assert done.id == run.id and done.output == "done" and LOOKED == ["8"]
    assert results(done) == [("search_tools", FOUND), ("lookup", "order 8")]


@pytest.mark.parametrize("lacking", ["no deferred tool", "search off"])
async def test_an_agent_without_tool_search_refuses_the_approval(
    tmp_path: Path, lacking: str
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    paused = agent(call("search_tools", {"query": "order"}, id="c1"), store=store, session_id="s1")
    run = await paused.run("go")
    tools, config = ((), SEARCHING) if lacking == "no deferred tool" else ((lookup,), None)
    worker = Agent.resume(
        "s1",
        store=store,
        client=ScriptedModel([reply("done")]),
        tools=list(tools),
        config=config or RunConfig(headless=False, tool_search="off"),
    )
    with pytest.raises(InvalidInput, match="would run tool 'search_tools', which the agent"):
        await worker.continue_run(decisions={"c1": Approve()})
    stored = store.load_run(run.id)
    assert stored is not None and stored.run.paused and stored.run.decisions == []
