"""``run(toolsets=...)`` and the run's continuations (SPEC 17, 22): kept where they can be.

A paused run continues with the toolsets its ``run()`` was given, on the session that ran it
(``continue_run``, ``continue_stream``), as a demanding user expects. Elsewhere (another
process, a session rebuilt from the store) they cannot be known: they are passed again,
``continue_run(toolsets=...)``, and approving a call of theirs without them is ``InvalidInput``
naming that fix, nothing recorded. A batch agent's
turns always continue elsewhere (``agentloop.batch.poll``), so a batch run refuses them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, Approve, RunConfig, tool
from agentloop.errors import ConfigurationError, InvalidInput
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.toolsets import FunctionToolset

WIPED: list[str] = []


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Wipe a path."""
    WIPED.append(path)
    return f"wiped {path}"


def toolsets() -> list[FunctionToolset]:
    return [FunctionToolset([wipe], name="admin")]


async def test_a_paused_run_continues_with_its_own_toolsets() -> None:
    WIPED.clear()
    session = Agent(ScriptedModel([call("wipe", {"path": "a"}), reply("done")])).session()
    run = await session.run("go", toolsets=toolsets())
    assert [p.call.name for p in run.pending] == ["wipe"]
    run = await session.continue_run(decisions={run.pending[0].id: Approve()})
    assert run.output == "done" and WIPED == ["a"]


async def test_a_streamed_continuation_keeps_them_too() -> None:
    WIPED.clear()
    model = ScriptedModel([call("wipe", {"path": "b"}), reply("done")])
    session = Agent(model).session()
    async with session.stream("go", toolsets=toolsets()) as events:
        async for _ in events:
            pass
    pending = events.run.pending[0].id
    async with session.continue_stream(decisions={pending: Approve()}) as events:
        async for _ in events:
            pass
    assert events.run.output == "done" and WIPED == ["b"]


async def test_the_next_run_does_not_inherit_them() -> None:
    steps = [call("wipe", {"path": "a"}), reply("done"), call("wipe", {"path": "c"}), reply("ok")]
    session = Agent(ScriptedModel(steps)).session()
    run = await session.run("go", toolsets=toolsets())
    await session.continue_run(decisions={run.pending[0].id: Approve()})
    later = await session.run("again")
    assert later.pending == () and later.output == "ok"
    (result,) = later.messages[-2].tool_results_parts
    assert result.is_error and "not available" in str(result.content)


async def test_continuing_elsewhere_without_them_names_the_fix(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    agent = Agent(ScriptedModel([call("wipe", {"path": "a"})]), store=SQLiteStore(db))
    session = agent.session()
    run = await session.run("go", toolsets=toolsets())
    elsewhere = Agent.resume(session.id, store=SQLiteStore(db), client=ScriptedModel([reply("x")]))
    with pytest.raises(InvalidInput, match=r"Agent\(toolsets=\.\.\.\)") as info:
        await elsewhere.continue_run(decisions={run.pending[0].id: Approve()})
    assert "continue_run(toolsets=...)" in str(info.value) and "stays paused" in str(info.value)
    stored = SQLiteStore(db).load_run(run.id)
    assert stored is not None and stored.run.pending and not stored.run.decisions


def test_a_batch_run_refuses_run_toolsets(tmp_path: Path) -> None:
    from agentloop.providers.openai import OpenAIClient

    client = OpenAIClient("gpt-test", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    agent = Agent(client, store=SQLiteStore(tmp_path / "s.db"), config=RunConfig(batch=True))
    with pytest.raises(ConfigurationError, match=r"Agent\(\.\.\., toolsets=\[\.\.\.\]\)"):
        agent.run_sync("go", toolsets=toolsets())
    assert agent.session().runs == []


async def test_continue_run_toolsets_run_an_approved_call_elsewhere(tmp_path: Path) -> None:
    WIPED.clear()
    db = tmp_path / "s.db"
    agent = Agent(ScriptedModel([call("wipe", {"path": "a"})]), store=SQLiteStore(db))
    run = await agent.run("go", toolsets=toolsets())
    model = ScriptedModel([reply("done")])
    elsewhere = Agent.resume(agent.session_id, store=SQLiteStore(db), client=model)
    decisions = {run.pending[0].id: Approve()}
    done = await elsewhere.continue_run(decisions=decisions, toolsets=toolsets())
    assert done.id == run.id and done.output == "done" and WIPED == ["a"]
    assert [spec.name for spec in model.requests[0].tools] == ["wipe"]  # offered, as run()'s are


def test_continue_run_sync_takes_them_too(tmp_path: Path) -> None:
    WIPED.clear()
    db = tmp_path / "s.db"
    agent = Agent(ScriptedModel([call("wipe", {"path": "s"})]), store=SQLiteStore(db))
    run = agent.run_sync("go", toolsets=toolsets())
    with Agent.resume(
        agent.session_id, store=SQLiteStore(db), client=ScriptedModel([reply("done")])
    ) as elsewhere:
        decisions = {run.pending[0].id: Approve()}
        done = elsewhere.continue_run_sync(decisions=decisions, toolsets=toolsets())
    assert done.output == "done" and WIPED == ["s"]


async def test_continue_stream_takes_them_on_a_restored_session(tmp_path: Path) -> None:
    WIPED.clear()
    db = tmp_path / "s.db"
    session = Agent(ScriptedModel([call("wipe", {"path": "t"})]), store=SQLiteStore(db)).session()
    run = await session.run("go", toolsets=toolsets())
    other = Agent(ScriptedModel([reply("done")]), store=SQLiteStore(db)).session(session.id)
    decisions = {run.pending[0].id: Approve()}
    async with other.continue_stream(decisions=decisions, toolsets=toolsets()) as events:
        async for _ in events:
            pass
    assert events.run.output == "done" and WIPED == ["t"]


async def test_bad_continue_run_toolsets_change_nothing() -> None:
    session = Agent(ScriptedModel([call("wipe", {"path": "a"}), reply("done")])).session()
    run = await session.run("go", toolsets=toolsets())
    decisions = {run.pending[0].id: Approve()}
    with pytest.raises(ConfigurationError, match="not a toolset"):
        await session.continue_run(decisions=decisions, toolsets=["not a toolset"])  # type: ignore[list-item]
    assert session.current_run is run and run.paused and not run.decisions
    done = await session.continue_run(decisions=decisions)  # still its run(toolsets=...)'s
    assert done.output == "done"


async def test_continue_run_toolsets_without_the_approved_tool_are_refused(tmp_path: Path) -> None:
    @tool
    def other() -> str:
        """Another tool."""
        return "x"

    db = tmp_path / "s.db"
    agent = Agent(ScriptedModel([call("wipe", {"path": "a"})]), store=SQLiteStore(db))
    run = await agent.run("go", toolsets=toolsets())
    elsewhere = Agent.resume(agent.session_id, store=SQLiteStore(db), client=ScriptedModel([]))
    wrong = [FunctionToolset([other], name="misc")]
    with pytest.raises(InvalidInput, match=r"would run tool 'wipe'.*continue_run\(toolsets="):
        await elsewhere.continue_run(decisions={run.pending[0].id: Approve()}, toolsets=wrong)
    stored = SQLiteStore(db).load_run(run.id)
    assert stored is not None and stored.run.pending and not stored.run.decisions
