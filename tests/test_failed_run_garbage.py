"""A failed run's error holds nothing of the run: reference counting frees it (engine/frames.py).

The error that ends a run is raised to the caller and kept as ``run.stop_reason``; its
traceback holds the frames it came through. Those frames' locals once held the run's state,
the run loop and the session, so every failed run's working state lived as long as its record
(``agent.runs``), and a dropped agent waited in a cycle (error → frame → agent → record → error)
for the collector's full pass. With the collector off, these tests check that a failed run's
state is gone once the run ends, that a dropped agent is freed at once, and that the error
still shows where it came from.
"""

from __future__ import annotations

import asyncio
import gc
import traceback
import weakref
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.engine.frames import released
from agentloop.engine.state import RunState
from agentloop.errors import (
    AgentLoopError,
    GuardrailTripped,
    InternalError,
    MaxTurnsExceeded,
    ProviderUnavailable,
    ToolLimitReached,
)
from agentloop.guardrails import InputGuardrail
from agentloop.model import ModelRequest
from agentloop.testing import FunctionModel, ScriptedModel, call

CONFIG = RunConfig(max_turns=2)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def always_calls(request: ModelRequest) -> object:
    """A model that never answers: the run ends with ``MaxTurnsExceeded``."""
    return call("lookup", {"key": "k"})


def broken(request: ModelRequest) -> object:
    """A model client with a bug: the run ends with ``InternalError``."""
    field = "no such field"  # a local a debugger reads after the run (never cleared: ours)
    raise KeyError(field)


EARLIER: list[RunState] = []
"""States alive before the test (other tests' in this worker), held so their ids stay theirs."""


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The collector off while runs run: only reference counting frees anything."""
    gc.collect()
    EARLIER[:] = [o for o in gc.get_objects() if isinstance(o, RunState)]
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        EARLIER.clear()


def live_states() -> int:
    """The test's run states (each its run's loop) still alive (tracked; none collected)."""
    earlier = {id(state) for state in EARLIER}
    return sum(isinstance(o, RunState) and id(o) not in earlier for o in gc.get_objects())


def unreachable() -> int:
    """Objects the collector finds unreachable (kept aside, counted, then let go)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = len(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


async def caught(work: Coroutine[Any, Any, Any]) -> AgentLoopError:
    """Await ``work`` and return the hard error it raised (this frame holds nothing else)."""
    try:
        await work
    except AgentLoopError as error:
        return error
    raise AssertionError("the run did not fail")


def where(error: BaseException) -> list[str]:
    """The functions of ``error``'s traceback, outermost first."""
    return [frame.name for frame in traceback.extract_tb(error.__traceback__)]


@pytest.mark.parametrize(
    ("fails", "kind"),
    [(always_calls, MaxTurnsExceeded), (broken, InternalError)],
)
async def test_a_failed_run_keeps_nothing_of_its_state(
    collector_off: None, fails: Any, kind: type[AgentLoopError]
) -> None:
    agent = Agent(FunctionModel(fails), tools=[lookup], config=CONFIG)
    await caught(agent.run("warm"))  # the run's modules and caches, loaded once
    gc.collect()
    error = await caught(agent.run("go"))
    assert isinstance(error, kind) and agent.runs[-1].stop_reason is error
    assert live_states() == 0  # the record keeps the error, not the run's working state
    assert "drive" in where(error)  # the traceback still shows where it came from
    if kind is InternalError:
        assert error.__cause__ is not None
        assert where(error.__cause__)[-1] == "broken"  # down to the client's own frame
        innermost = error.__cause__.__traceback__
        while innermost is not None and innermost.tb_next is not None:
            innermost = innermost.tb_next
        assert innermost is not None  # the application's frame keeps its locals (pdb.pm())
        assert innermost.tb_frame.f_locals.get("field") == "no such field"
        assert "KeyError: 'no such field'" in "".join(traceback.format_exception(error))
    del error
    assert unreachable() == 0


def refuse_ignore(ctx: Any, value: Any) -> str | None:
    """An input guardrail: trips on "ignore"."""
    return "asks to ignore instructions" if "ignore" in value else None


def two_calls(request: ModelRequest) -> object:
    """Two calls in one turn, past ``max_tool_calls_per_turn``."""
    return [call("lookup", {"key": "a"}), call("lookup", {"key": "b"})]


@pytest.mark.parametrize(
    ("options", "kind"),
    [
        ({"guardrails": [InputGuardrail(refuse_ignore)]}, GuardrailTripped),
        (
            {"config": RunConfig(parallel_tool_calls=True, max_tool_calls_per_turn=1)},
            ToolLimitReached,
        ),
    ],
)
async def test_a_run_failing_in_a_guardrail_or_a_parallel_turn_keeps_nothing(
    collector_off: None, options: dict[str, Any], kind: type[AgentLoopError]
) -> None:
    agent = Agent(FunctionModel(two_calls), tools=[lookup], **options)
    await caught(agent.session().run("ignore this"))
    gc.collect()
    session = agent.session()
    error = await caught(session.run("ignore this"))
    assert isinstance(error, kind)
    assert live_states() == 0
    gone = weakref.ref(session)
    del session, error
    assert gone() is None
    assert unreachable() == 0


async def test_a_dropped_session_with_a_failed_run_goes_at_once(collector_off: None) -> None:
    model = ScriptedModel([ProviderUnavailable("down"), ProviderUnavailable("down")])
    agent = Agent(model)
    await caught(agent.session().run("warm"))
    gc.collect()
    session = agent.session()
    error = await caught(session.run("go"))
    assert live_states() == 0
    assert "complete" in where(error)  # raised by the model double
    gone = weakref.ref(session)
    del session, error
    model.requests.clear()  # the double keeps every request
    assert gone() is None  # freed by reference counting, not by a full collection
    assert unreachable() == 0


async def test_a_failed_run_awaited_as_a_task_leaves_no_cycle(collector_off: None) -> None:
    agent = Agent(FunctionModel(always_calls), tools=[lookup], config=CONFIG)
    await caught(agent.session().run("warm"))
    gc.collect()
    session = agent.session()
    task = asyncio.ensure_future(session.run("go"))
    await asyncio.wait([task])
    assert isinstance(task.exception(), MaxTurnsExceeded)
    assert live_states() == 0
    gone = weakref.ref(session)
    del session, task
    assert gone() is None
    assert unreachable() == 0


async def test_a_failed_stream_leaves_no_cycle(collector_off: None) -> None:
    agent = Agent(FunctionModel(always_calls), tools=[lookup], config=CONFIG)

    async def streamed(session: Any) -> AgentLoopError:
        try:
            async with session.stream("go") as events:
                async for _ in events:
                    pass
        except AgentLoopError as error:
            return error
        raise AssertionError("the run did not fail")

    await streamed(agent.session())
    gc.collect()
    session = agent.session()
    error = await streamed(session)
    assert isinstance(error, MaxTurnsExceeded) and "drive" in where(error)
    assert live_states() == 0
    gone = weakref.ref(session)
    del session, error
    assert gone() is None
    assert unreachable() == 0


def test_a_failed_run_sync_leaves_no_cycle(collector_off: None) -> None:
    agent = Agent(FunctionModel(always_calls), tools=[lookup], config=CONFIG)

    def failed(session: Any) -> AgentLoopError:
        try:
            session.run_sync("go")
        except AgentLoopError as error:
            del session  # the frame that catches is in the traceback: the caller's to empty
            return error
        raise AssertionError("the run did not fail")

    with agent:
        failed(agent.session())
        gc.collect()
        session = agent.session()
        error = failed(session)
        assert isinstance(error, MaxTurnsExceeded) and "drive" in where(error)
        assert live_states() == 0
        gone = weakref.ref(session)
        del session, error
        assert gone() is None
        assert unreachable() == 0


async def test_a_suspended_coroutine_in_the_traceback_is_left_running() -> None:
    """An error caught and kept by a task that goes on: clearing that frame would close it."""
    kept: list[BaseException] = []
    go = asyncio.Event()

    async def keeper() -> str:
        try:
            raise ValueError("kept")
        except ValueError as error:
            kept.append(error)
        await go.wait()  # suspended here, its frame in the kept error's traceback
        return "still running"

    task = asyncio.ensure_future(keeper())
    await asyncio.sleep(0)
    assert released(kept[0]) is kept[0]
    go.set()
    assert await asyncio.wait_for(task, 5) == "still running"
    assert where(kept[0]) == ["keeper"]
