"""A finished run leaves no reference cycles: reference counting frees all of it (issue 39).

At 1,000 concurrent runs every run's objects outlive two young collections and reach the
collector's oldest generation; objects in a cycle are then freed only by a full collection,
which scans the whole heap. One cycle (the run's state and its client-event bridge) used to
hold about 55 objects a run (the state, transcript, record, context guard, budget gate) until
such a pass. These tests count what the collector finds unreachable after runs end: nothing.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from agentloop import Agent, tool
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, call, reply


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _answer(request: ModelRequest) -> object:
    """One tool call, then the answer."""
    if any(m.role == "tool" for m in request.messages):
        return reply("done")
    return call("lookup", {"key": "k"})


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The collector off while runs run, so only ``gc.collect()`` finds their cycles."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _unreachable() -> int:
    """Objects the collector finds unreachable (kept aside, counted, then let go)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = len(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


async def test_runs_on_sessions_leave_no_cycles(collector_off: None) -> None:
    model = FunctionModel(_answer)
    agent = Agent(model, tools=[lookup])
    await agent.session().run("warm")  # the run's modules and caches, loaded once
    gc.collect()
    for _ in range(5):
        run = await agent.session().run("go")
        assert run.output == "done"
    del run
    model.requests.clear()  # the double keeps every request (and what it references)
    assert _unreachable() == 0


async def test_runs_on_one_session_leave_no_cycles(collector_off: None) -> None:
    model = FunctionModel(_answer)
    session = Agent(model, tools=[lookup]).session()
    await session.run("warm")
    gc.collect()
    for _ in range(3):
        await session.run("go")
    model.requests.clear()
    assert _unreachable() == 0


async def test_streams_leave_no_cycles(collector_off: None) -> None:
    model = FunctionModel(_answer)
    agent = Agent(model, tools=[lookup])

    async def consumed() -> None:
        async with agent.session().stream("go") as events:
            async for _ in events:
                pass

    await consumed()
    gc.collect()
    for _ in range(3):
        await consumed()
    model.requests.clear()
    assert _unreachable() == 0
