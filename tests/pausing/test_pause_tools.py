"""An approval is never spent on nothing, and a continuation gets the app's deps (SPEC 17).

An ``Approve`` or ``Edit`` for a call whose tool the continuing agent lacks is ``InvalidInput``
naming the tool before anything is recorded: the run stays paused (in memory and in the store)
and a process that has the tool continues it. ``deps`` may be a factory ``(run) -> deps``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, Answer, Approve, Deny, Edit, ToolContext, tool
from agentloop.errors import InvalidInput
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply
from agentloop.tools import Tool

pytestmark = pytest.mark.usefixtures("no_real_sleep")


@tool(requires_approval=True)
def refund(ctx: ToolContext[Any], order: str) -> str:
    """Refund an order."""
    return f"refunded {order} with {ctx.deps!r}"


@tool(external=True)
def ask_customer(question: str) -> str:
    """Ask the customer in the app."""
    raise AssertionError("never run by the agent")


async def paused(store: SQLiteStore, *steps: Any) -> str:
    """A run of session s1 paused on the given calls; its id."""
    model = ScriptedModel(list(steps))
    agent = Agent(model, tools=[refund, ask_customer], store=store, session_id="s1")
    run = await agent.run("go")
    assert run.paused
    return run.id


def worker(store: SQLiteStore, tools: Sequence[Any], *replies: str) -> Agent[Any]:
    """Another process's agent on the same store (a worker or a CLI)."""
    model = ScriptedModel([reply(r) for r in replies or ("done",)])
    return Agent.resume("s1", store=store, client=model, tools=list(tools))


def still_paused(store: SQLiteStore, run_id: str) -> None:
    stored = store.load_run(run_id)
    assert stored is not None and stored.run.paused and stored.run.decisions == []


@pytest.mark.parametrize("decision", [Approve(), Edit({"order": "B"})])
async def test_an_approval_for_a_tool_the_agent_lacks_is_refused_and_the_run_stays_paused(
    tmp_path: Path, decision: Any
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    run_id = await paused(store, call("refund", {"order": "A"}, id="c1"))
    bare = worker(store, [], "Refunded")
    with pytest.raises(InvalidInput, match=r"'c1' would run tool 'refund', which the agent"):
        await bare.continue_run(decisions={"c1": decision})
    still_paused(store, run_id)
    assert bare.current_run is not None and bare.current_run.paused
    with pytest.raises(InvalidInput, match="tool 'refund'"):  # and again: nothing was spent
        await bare.continue_run(decisions={"c1": decision})

    done = await worker(store, [refund]).continue_run(decisions={"c1": decision})
    assert done.id == run_id and done.output == "done"
    assert done.messages[-2].tool_results_parts[0].content.startswith("refunded")


async def test_deny_and_answer_need_no_tool(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    steps = [
        call("refund", {"order": "A"}, id="c1"),
        call("ask_customer", {"question": "q"}, id="c2"),
    ]
    await paused(store, *steps[:1])
    done = await worker(store, []).continue_run(decisions={"c1": Deny("no")})
    assert done.output == "done"


def test_continue_run_sync_refuses_as_continue_run_does(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    model = ScriptedModel([call("refund", {"order": "A"}, id="c1")])
    run = Agent(model, tools=[refund], store=store, session_id="s1").run_sync("go")
    agent = Agent(ScriptedModel([reply("x")]), store=store)
    with pytest.raises(InvalidInput, match="tool 'refund'"):
        agent.session("s1").continue_run_sync(decisions={"c1": Approve()})
    bare = worker(store, [])
    with pytest.raises(InvalidInput, match="tool 'refund'"):
        bare.continue_run_sync(decisions={"c1": Approve()})
    still_paused(store, run.id)


async def test_a_session_and_its_stream_refuse_as_the_agent_does(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    run_id = await paused(store, call("refund", {"order": "A"}, id="c1"))
    session = Agent(ScriptedModel([reply("x")]), store=store).session("s1")
    with pytest.raises(InvalidInput, match="tool 'refund'"):
        await session.continue_run(decisions={"c1": Approve()})
    with pytest.raises(InvalidInput, match="tool 'refund'"):
        async with session.continue_stream(decisions={"c1": Approve()}):
            pass
    still_paused(store, run_id)


async def test_the_check_sees_an_override_and_tools_a_source_lists_at_run_time(
    tmp_path: Path,
) -> None:
    class Source:
        name, version = "remote", 1

        def __init__(self, tools: list[Tool]) -> None:
            self.tools = tools

        async def list_tools(self) -> Sequence[Tool]:
            return self.tools

        async def aclose(self) -> None:
            pass

    store = SQLiteStore(tmp_path / "runs.db")
    run_id = await paused(store, call("refund", {"order": "A"}, id="c1"))
    empty = worker(store, [Source([])])
    with pytest.raises(InvalidInput, match="tool 'refund'"):
        await empty.continue_run(decisions={"c1": Approve()})
    still_paused(store, run_id)
    listed = worker(store, [Source([refund])])  # listed when the continuation starts
    done = await listed.continue_run(decisions={"c1": Approve()})
    assert done.output == "done"


async def test_an_override_that_lacks_the_tool_is_refused(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    run_id = await paused(store, call("refund", {"order": "A"}, id="c1"))
    agent = worker(store, [refund])
    with agent.override(tools=[ask_customer]), pytest.raises(InvalidInput, match="'refund'"):
        await agent.continue_run(decisions={"c1": Approve()})
    still_paused(store, run_id)


async def test_deps_is_a_value_or_a_factory_of_the_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    seen: list[str] = []

    async def make(run: Any) -> dict[str, str]:
        seen.append(run.session_id)
        return {"db": "pool"}

    await paused(store, call("refund", {"order": "A"}, id="c1"))
    done = await worker(store, [refund]).continue_run(decisions={"c1": Approve()}, deps=make)
    assert seen == ["s1"]
    assert done.messages[-2].tool_results_parts[0].content == "refunded A with {'db': 'pool'}"


async def test_a_deps_factory_is_not_called_for_a_refused_decision(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    await paused(store, call("refund", {"order": "A"}, id="c1"))
    called: list[Any] = []
    with pytest.raises(InvalidInput):
        await worker(store, []).continue_run(decisions={"c1": Approve()}, deps=called.append)
    assert called == []


@pytest.mark.parametrize("content", ["circular", b"\xff"])
async def test_an_answer_that_cannot_be_text_is_invalid_input_and_records_nothing(
    tmp_path: Path, content: Any
) -> None:
    if content == "circular":
        content = []
        content.append(content)
    store = SQLiteStore(tmp_path / "runs.db")
    run_id = await paused(store, call("ask_customer", {"question": "q"}, id="c2"))
    agent = worker(store, [])
    with pytest.raises(InvalidInput, match=r"Answer for 'c2': its content .* cannot be made"):
        await agent.continue_run(decisions={"c2": Answer(content)})
    still_paused(store, run_id)
    done = await agent.continue_run(decisions={"c2": Answer("yes")})
    assert done.output == "done"
