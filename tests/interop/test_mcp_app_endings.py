"""An agent served over MCP ends every run it starts, and exposes no run-only tool (SPEC 17, 26).

Each MCP call runs on a fresh session nobody else holds, so a run the call cannot decide is
abandoned (``cancel_run``: finalized ``Cancelled``, stored as such) rather than left paused for
ever in the store, where an operator's later approval would run a tool whose result no caller
reads. Driven by the official ``mcp`` client over streamable HTTP, the runs kept in a real
``SQLiteStore``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from agentloop import Agent, Observer, tool
from agentloop.errors import InvalidInput
from agentloop.events import Event, RunFinished
from agentloop.mcp import MCPApp
from agentloop.pausing import Approve
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FunctionModel, call, reply

from ._serve import serving
from .test_mcp_app import over_http, text

BOOKED: list[str] = []


@tool(requires_approval=True)
def book(city: str) -> str:
    """Book a trip."""
    BOOKED.append(city)
    return f"booked {city}"


@tool
def look(city: str) -> str:
    """Look a city up."""
    return f"{city} is far"


def answer(request: Any) -> Any:
    last = request.messages[-1]
    if last.role == "tool" and last.parts[0].name == "book":
        return reply(last.parts[0].content)
    if last.role == "tool":
        return call("book", {"city": "Oslo"})
    return call("look", {"city": "Oslo"})


class Ends(Observer):
    def __init__(self) -> None:
        self.runs: list[Any] = []

    def on_event(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            self.runs.append(event.run)


def booking_agent(store: SQLiteStore, ends: Ends) -> Agent[str | None]:
    return Agent(FunctionModel(answer), tools=[look, book], store=store, observers=[ends])


async def test_a_pause_the_client_cannot_decide_ends_the_run_cancelled(tmp_path: Path) -> None:
    BOOKED.clear()
    ends = Ends()
    with SQLiteStore(tmp_path / "runs.db") as store:
        app = MCPApp(booking_agent(store, ends), name="travel")
        async with over_http(app) as session:
            paused = await session.call_tool("travel", {"input": "book Oslo"})
        assert text(paused) == (
            "agent 'travel' paused: 'book' needs a decision this client cannot give"
        )
        [stored] = store.load_runs()
        assert stored.finished and not stored.run.paused and stored.run.pending == ()
        assert stored.run.stop_reason is not None and stored.run.stop_reason.is_cancelled()
        # the completed turn commits, the paused one is dropped (SPEC 17's cancel_run)
        history = store.load_history(stored.session_id)
        assert [m.role for m in history] == ["user", "assistant", "tool"]
        call_id = stored.run.turns[-1].tool_calls[0].id
        resumed = Agent.resume(stored.session_id, store=store, client=FunctionModel(answer))
        with pytest.raises(InvalidInput):  # nothing is left to approve: book never runs unseen
            await resumed.continue_run(decisions={call_id: Approve()})
    assert BOOKED == []
    assert len(ends.runs) == 2  # the pause's RunFinished, then the end's (one Run)
    last = ends.runs[-1].stop_reason
    assert last is not None and last.is_cancelled()


async def test_a_call_cancelled_while_asking_ends_the_run_cancelled(tmp_path: Path) -> None:
    asking = asyncio.Event()

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asking.set()
        await asyncio.Event().wait()  # the person never answers
        raise AssertionError("unreachable")

    ends = Ends()
    with SQLiteStore(tmp_path / "runs.db") as store:
        app = MCPApp(booking_agent(store, ends), name="travel")
        async with over_http(app, elicitation_callback=elicit) as session:
            async with anyio.create_task_group() as group:
                group.start_soon(session.call_tool, "travel", {"input": "book Oslo"})
                await asyncio.wait_for(asking.wait(), 10)
                group.cancel_scope.cancel()
            for _ in range(500):
                if any(r.stop_reason is not None for r in ends.runs):
                    break
                await asyncio.sleep(0.01)
        [stored] = store.load_runs()
    assert stored.finished and not stored.run.paused
    assert stored.run.stop_reason is not None and stored.run.stop_reason.is_cancelled()


async def test_expose_tools_leaves_out_the_tools_that_work_only_inside_a_run() -> None:
    from agentloop.memory import InMemoryMemoryStore, Memory

    ops = Agent(FunctionModel(answer), name="ops")
    memory = Memory(InMemoryMemoryStore(), namespace=lambda ctx: ("user", "ann"))
    agent = Agent(FunctionModel(answer), tools=[look, book], handoffs=[ops], memory=memory)
    async with over_http(MCPApp(agent, name="travel", expose_tools=True)) as session:
        names = [t.name for t in (await session.list_tools()).tools]
        moved = await session.call_tool("transfer_to_ops", {})
        recalled = await session.call_tool("recall", {"query": "plans"})
        looked = await session.call_tool("look", {"city": "Oslo"})
    assert names == ["travel", "look"]  # book needs a decision; handoffs and memory need a run
    assert moved.is_error and text(moved) == "tool 'transfer_to_ops' is not available"
    assert recalled.is_error and text(recalled) == "tool 'recall' is not available"
    assert text(looked) == "Oslo is far"


async def test_expose_tools_lists_tool_sources_from_the_first_list_never_toolsets() -> None:
    from agentloop.mcp import MCPServer
    from agentloop.toolsets import FunctionToolset

    @tool
    def weigh(city: str) -> str:
        """Weigh a city (a toolset's: resolved per run, never exposed)."""
        return f"{city} is heavy"

    source = Agent(FunctionModel(answer), tools=[look])
    async with serving(MCPApp(source, name="atlas", expose_tools=True), lifespan=True) as url:
        mcp = MCPServer.http(url + "/mcp", name="atlas")
        front = Agent(FunctionModel(answer), tools=[mcp], toolsets=[FunctionToolset([weigh])])
        async with over_http(MCPApp(front, name="front", expose_tools=True)) as session:
            names = [t.name for t in (await session.list_tools()).tools]  # before any run
            looked = await session.call_tool("look", {"city": "Oslo"})
            weighed = await session.call_tool("weigh", {"city": "Oslo"})
        await front.aclose()
    assert names == ["front", "atlas", "look"]  # the source's, through its MCP server
    assert text(looked) == "Oslo is far"
    assert weighed.is_error and text(weighed) == "tool 'weigh' is not available"


async def test_expose_tools_with_a_source_down_still_lists_the_agent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from agentloop.mcp import MCPServer

    dead = MCPServer.http("http://127.0.0.1:9/mcp", name="atlas")  # nothing listens
    front = Agent(FunctionModel(answer), tools=[dead])
    async with over_http(MCPApp(front, name="front", expose_tools=True)) as session:
        names = [t.name for t in (await session.list_tools()).tools]
        looked = await session.call_tool("look", {"city": "Oslo"})
    await front.aclose()
    assert names == ["front"] and "expose_tools" in caplog.text
    assert looked.is_error and "atlas" in text(looked)  # the source named, nothing run
