"""``cancel_run`` (SPEC 17): a paused run abandoned, finalized as ``Cancelled``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Approve, tool
from agentloop import events as ev
from agentloop.engine.stored_cancel import cancel_stored
from agentloop.errors import Cancelled, InvalidInput
from agentloop.hooks import Hook
from agentloop.observers import Observer
from agentloop.run import Run
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.transcript import INTERRUPTED_TEXT, validate_transcript

pytestmark = pytest.mark.usefixtures("no_real_sleep")

RAN: list[str] = []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    RAN.append(f"refund {order}")
    return f"refunded {order}"


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    RAN.append(f"lookup {order}")
    return f"order {order}: 30 EUR"


class Ends(Hook):
    def __init__(self, ended: list[Run[Any]]) -> None:
        self.ended = ended

    async def on_run_end(self, run: Run[Any]) -> None:
        self.ended.append(run)


class Seen(Observer):
    def __init__(self) -> None:
        self.events: list[ev.Event] = []
        self.ended: list[Run[Any]] = []

    def on_event(self, event: ev.Event) -> None:
        self.events.append(event)


def pausing_steps() -> list[Any]:
    """Turn 0 looks up; turn 1 asks for a refund (pending) beside a lookup that runs."""
    return [
        call("lookup", {"order": "A1"}, id="c0"),
        [call("refund", {"order": "A1"}, id="c1"), call("lookup", {"order": "B2"}, id="c2")],
    ]


def agent_of(steps: list[Any], **kwargs: Any) -> tuple[Agent[Any], ScriptedModel, Seen]:
    seen = Seen()
    model = ScriptedModel(steps)
    agent = Agent(
        model, tools=[refund, lookup], observers=[seen], hooks=[Ends(seen.ended)], **kwargs
    )
    return agent, model, seen


async def test_a_paused_run_is_finalized_as_cancelled() -> None:
    RAN.clear()
    agent, _, seen = agent_of(pausing_steps())
    run = await agent.run("refund A1")
    assert run.paused and agent.history[-1].role == "tool"
    committed = agent.history
    seen.events.clear()
    cancelled = await agent.cancel_run()
    assert cancelled is run and isinstance(run.stop_reason, Cancelled)
    assert not run.paused and run.pending == () and run.output is None
    assert run.ended_at is not None
    assert RAN == ["lookup A1", "lookup B2"]  # the pending refund never ran
    assert agent.history == committed  # the paused turn is dropped, completed turns stay
    validate_transcript(agent.history)
    results = {r.call_id: r for m in run.messages for r in m.tool_results_parts}
    assert results["c1"].content == INTERRUPTED_TEXT and results["c1"].is_error
    assert results["c2"].content == "order B2: 30 EUR"  # what ran keeps its result
    assert [type(e) for e in seen.events] == [ev.RunFinished]
    assert seen.ended == [run, run]  # the pause, then the cancel


async def test_no_paused_run_twice_and_a_new_run_after() -> None:
    agent, model, _ = agent_of([*pausing_steps(), reply("fresh")])
    with pytest.raises(InvalidInput, match="no paused or waiting run"):
        await agent.cancel_run()
    await agent.run("refund A1")
    with pytest.raises(InvalidInput, match=r"continue_run.*cancel_run\(\)"):
        await agent.run("something else")
    await agent.cancel_run()
    with pytest.raises(InvalidInput, match="no paused or waiting run"):
        await agent.cancel_run()  # cancelling twice
    with pytest.raises(InvalidInput):
        await agent.continue_run(decisions={"c1": Approve()})
    done = await agent.run("something else")
    assert done.output == "fresh" and len(agent.runs) == 2
    sent = model.requests[-1].messages
    assert not any(p.id == "c1" for m in sent for p in m.tool_calls)  # the paused reply is gone
    validate_transcript(sent)


def test_cancel_run_sync_and_on_a_session() -> None:
    agent, _, _ = agent_of([*pausing_steps(), *pausing_steps()])
    session = agent.session()
    assert session.run_sync("refund A1").paused
    assert agent.runs == []  # the default session is another conversation
    with pytest.raises(InvalidInput, match="no paused or waiting run"):
        agent.cancel_run_sync()
    assert isinstance(session.cancel_run_sync().stop_reason, Cancelled)
    assert agent.run_sync("refund A1").paused
    assert isinstance(agent.cancel_run_sync().stop_reason, Cancelled)


async def test_a_stateless_run_leaves_the_default_session_alone() -> None:
    agent, _, _ = agent_of(pausing_steps())
    run = await agent.run("refund A1", history=[])
    assert run.paused and agent.runs == []
    with pytest.raises(InvalidInput, match="no paused or waiting run"):
        await agent.cancel_run()


async def test_a_running_session_is_not_cancel_run_s() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Wait."""
        started.set()
        await release.wait()
        return "ok"

    agent = Agent(ScriptedModel([call("slow", {}), reply("done")]), tools=[slow])
    task = asyncio.ensure_future(agent.run("go"))
    await started.wait()
    with pytest.raises(InvalidInput, match="is running"):
        await agent.cancel_run()
    release.set()
    assert (await task).output == "done"


async def test_stored_cancel_is_seen_by_another_process_and_a_new_run_follows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    agent, _, _ = agent_of(pausing_steps(), store=SQLiteStore(path))
    run = await agent.run("refund A1")
    cancelled = await cancel_stored(SQLiteStore(path), run.id)  # the CLI's path
    assert isinstance(cancelled.stop_reason, Cancelled)
    stored = SQLiteStore(path).load_run(run.id)
    assert stored is not None and stored.finished and not stored.run.paused
    assert isinstance(stored.run.stop_reason, Cancelled)
    with pytest.raises(InvalidInput, match="not paused or waiting"):
        await cancel_stored(SQLiteStore(path), run.id)
    model = ScriptedModel([reply("again")])
    resumed = Agent.resume(agent.session_id, store=SQLiteStore(path), client=model)
    with pytest.raises(InvalidInput, match="no paused or waiting run"):
        await resumed.cancel_run()
    assert (await resumed.run("next")).output == "again"
    validate_transcript(model.requests[-1].messages)
    assert RAN.count("refund A1") == 0


async def test_a_stale_copy_does_not_cancel_a_run_decided_elsewhere(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    agent, _, _ = agent_of(pausing_steps(), store=SQLiteStore(path))
    run = await agent.run("refund A1")
    other = Agent.resume(
        agent.session_id,
        store=SQLiteStore(path),
        client=ScriptedModel([reply("refunded")]),
        tools=[refund, lookup],
    )
    assert (await other.continue_run(decisions={"c1": Approve()})).output == "refunded"
    with pytest.raises(InvalidInput, match="no paused or waiting run"):
        await agent.cancel_run()  # this process's copy was still paused
    assert run.stop_reason is None
    with pytest.raises(InvalidInput, match="no stored run"):
        await cancel_stored(SQLiteStore(path), "nope")


async def test_a_paused_child_agent_is_cancelled_with_its_parent() -> None:
    wired: list[int] = []

    @tool(requires_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        wired.append(amount)
        return f"wired {amount}"

    child = Agent(ScriptedModel([call("wire", {"amount": 5}, id="w1")]), tools=[wire])
    banker = child.as_tool(name="banker", description="Moves money.")
    parent = Agent(ScriptedModel([call("banker", {"input": "pay"}, id="p1")]), tools=[banker])
    run = await parent.run("pay the bill")
    assert [p.path for p in run.pending] == [("banker",)]
    children = parent.default_session._children
    assert children is not None
    [kept] = children.values()
    assert kept.current_run.paused
    await parent.cancel_run()
    assert isinstance(kept.current_run.stop_reason, Cancelled) and not kept.current_run.paused
    assert parent.default_session._children is None and wired == []


@pytest.mark.parametrize("where", ["here", "stored"])
async def test_the_paused_turns_staged_memory_writes_are_dropped(
    tmp_path: Path, where: str
) -> None:
    from agentloop.memory import Memory, SQLiteMemoryStore

    namespace = ("user", "ada")
    memory_store = SQLiteMemoryStore(tmp_path / "memory.db")
    memory = Memory(memory_store, namespace=lambda ctx: namespace)
    steps = [
        call("remember", {"text": "turn zero"}),
        [call("remember", {"text": "paused fact"}), call("refund", {"order": "A"}, id="c1")],
        call("remember", {"text": "after"}),
        reply("ok"),
    ]
    store = SQLiteStore(tmp_path / "runs.db")
    agent = Agent(ScriptedModel(steps), tools=[refund], memory=memory, store=store)
    assert (await agent.run("go")).paused
    if where == "here":
        await agent.cancel_run()
    else:
        await cancel_stored(SQLiteStore(tmp_path / "runs.db"), agent.current_run.id)  # type: ignore[union-attr]
        agent = Agent.resume(
            agent.session_id,
            store=SQLiteStore(tmp_path / "runs.db"),
            client=ScriptedModel(steps[2:]),
            tools=[refund],
            memory=memory,
        )
    assert {i.text for i in await memory_store.search(namespace, "")} == {"turn zero"}
    assert (await agent.run("again")).output == "ok"
    texts = {i.text for i in await memory_store.search(namespace, "")}
    await memory_store.aclose()
    assert texts == {"turn zero", "after"}  # the paused turn's write never lands
