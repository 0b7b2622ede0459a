"""Memory across a handoff (SPEC 26, 27): the run's memory stays the starting agent's.

A receiver's model keeps the memory tools (made for its own client: the native tool on Claude),
its writes are staged and applied at finalize like the starting agent's, under the run's
namespace, and the next run (another process: a reopened store) reads them. Real SQLite stores,
the wire on Claude is ``tests/providers/test_anthropic_memory_handoffs.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, tool
from agentloop.errors import ConfigurationError
from agentloop.memory import InMemoryMemoryStore, Memory, SQLiteMemoryStore
from agentloop.pausing import Approve
from agentloop.providers.settings import Settings, build_client
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

NS = ("user", "ann")


def ann(ctx: Any) -> tuple[str, ...]:
    return NS


def results(run: Any) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for message in run.messages:
        for part in message.tool_results_parts:
            found.setdefault(part.name, []).append(str(part.content))
    return found


@tool(requires_approval=True)
def book(seat: str) -> str:
    """Book a seat."""
    return f"booked {seat}"


def receiver(steps: list[Any]) -> Agent[Any]:
    return Agent(ScriptedModel(steps), name="travel", tools=[book])


async def test_a_receiver_remembers_and_the_next_run_elsewhere_recalls(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    back = receiver([call("remember", {"text": "ann likes aisle seats"}), reply("noted")])
    front_model = ScriptedModel([call("transfer_to_travel", {})])
    memory = Memory(SQLiteMemoryStore(db), namespace=ann, auto_recall=3)
    with SQLiteStore(db) as store:
        front = Agent(front_model, handoffs=[back], memory=memory, store=store)
        run = await front.run("I like aisle seats")
        session_id = front.session_id
    assert run.output == "noted" and run.last_agent == "travel"
    assert results(run)["remember"][0].startswith("remembered as ")
    offered = [s.name for s in back.client.requests[0].tools]  # type: ignore[attr-defined]
    assert {"remember", "recall", "forget"} <= set(offered) and "book" in offered
    await memory.store.aclose()

    later_model = ScriptedModel([call("recall", {"query": "aisle"}), reply("aisle it is")])
    memory = Memory(SQLiteMemoryStore(db), namespace=ann, auto_recall=3)
    with SQLiteStore(db) as store:
        later = Agent(later_model, handoffs=[receiver([])], memory=memory, store=store)
        again = await later.session(session_id).run("which aisle seats?")
    await memory.store.aclose()
    assert "ann likes aisle seats" in (later_model.requests[0].system or "")  # auto recall
    assert results(again)["recall"][0].endswith("] ann likes aisle seats")


async def test_a_paused_receiver_keeps_memory_across_processes(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    steps = [[call("remember", {"text": "ann wants 12C"}), call("book", {"seat": "12C"})]]
    memory = Memory(SQLiteMemoryStore(db), namespace=ann)
    with SQLiteStore(db) as store:
        front_model = ScriptedModel([call("transfer_to_travel", {})])
        front = Agent(front_model, handoffs=[receiver(steps)], memory=memory, store=store)
        run = await front.run("book 12C")
        session_id = front.session_id
    assert run.paused and [p.call.name for p in run.pending] == ["book"]
    assert await memory.store.count(NS) == 0  # staged with the paused turn (SPEC 27)
    await memory.store.aclose()

    back = receiver([call("recall", {"query": "12C"}), reply("booked and noted")])
    memory = Memory(SQLiteMemoryStore(db), namespace=ann)
    with SQLiteStore(db) as store:
        other = Agent(ScriptedModel([]), handoffs=[back], memory=memory, store=store)
        done = await other.session(session_id).continue_run(
            decisions={run.pending[0].id: Approve()}
        )
    assert done.output == "booked and noted" and done.last_agent == "travel"
    assert results(done)["recall"][0].endswith("] ann wants 12C")
    assert [i.text for i in await memory.store.search(NS, "12C")] == ["ann wants 12C"]
    await memory.store.aclose()


def test_a_receiver_tool_of_a_memory_name_is_refused_at_construction() -> None:
    @tool
    def recall(query: str) -> str:
        """The receiver's own recall."""
        return query

    back = Agent(ScriptedModel([]), name="travel", tools=[recall])
    memory = Memory(InMemoryMemoryStore(), namespace=ann)
    with pytest.raises(ConfigurationError, match="receiver 'travel' has a tool named 'recall'"):
        Agent(ScriptedModel([]), handoffs=[back], memory=memory)
    Agent(ScriptedModel([]), handoffs=[back])  # without memory= it is the receiver's business


def test_anthropic_tool_true_with_a_receiver_that_is_not_claude_is_refused() -> None:
    back = Agent(ScriptedModel([]), name="travel")
    claude = build_client(
        Settings(
            provider="anthropic",
            model="claude-sonnet-4-5",
            api_key="sk-ant-x",
            base_url="http://127.0.0.1:9",
        )
    )
    memory = Memory(InMemoryMemoryStore(), namespace=ann, anthropic_tool=True)
    with pytest.raises(ConfigurationError, match="anthropic_tool"):
        Agent(claude, handoffs=[back], memory=memory)
