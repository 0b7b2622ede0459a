"""What an agent's sessions share to start cheaply never carries one session's or run's state.

A session's dispatcher takes its gates, monotonic clock and recovery check from one tuple kept
per agent; a run reads the agent's attributes through the session (the agent's own dict); a
session's budget gate is begun by its first run (and made only when its budget draws a line or
somebody asks for it, as its detectors are made when first needed). These tests hold the sharing
to its promise: two concurrent sessions, two runs in a row, an ``override()`` block, an agent
changed later.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from agentloop import Agent, Budget, Hook, RunConfig, tool
from agentloop.messages import Message, TextPart, ToolCallPart, Usage
from agentloop.model import ModelRequest, ModelResponse
from agentloop.safety.budget import BudgetGate

pytestmark = pytest.mark.usefixtures("no_real_sleep")


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class OneCall:
    """Asks for ``lookup`` once, then answers with its own name (yields between the two)."""

    provider = "fake"

    def __init__(self, name: str) -> None:
        self.model = name
        self.requests: list[ModelRequest] = []

    def check_provider_tools(self, tools: Any, functions: Any) -> None:
        pass

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        await asyncio.sleep(0)
        if request.messages[-1].role == "user":
            part = ToolCallPart(f"c{len(self.requests)}", "lookup", {"key": "k"})
            return ModelResponse(
                Message("assistant", (part,)), Usage(10, 5), stop_reason="tool_use"
            )
        text = Message("assistant", (TextPart(self.model),))
        return ModelResponse(text, Usage(10, 5), stop_reason="end_turn")

    async def aclose(self) -> None:
        pass


async def test_two_concurrent_sessions_share_gates_and_count_their_own_spend() -> None:
    agent = Agent(cast(Any, OneCall("a")), tools=[lookup])
    first, second = agent.session(), agent.session()
    runs = await asyncio.gather(first.run("go"), second.run("go"))
    assert [r.output for r in runs] == ["a", "a"]
    assert first._dispatcher.gates is second._dispatcher.gates  # the agent's, shared
    assert first.safety is not second.safety
    for session in (first, second):  # each counted its own run only
        budget = session.safety.limits.budget
        assert budget.spent("turns") == 2
        assert budget.spent("tool_calls") == 1
        assert len(session.safety.loops.snapshot()["window"]) == 1


async def test_a_second_run_begins_at_zero_and_an_unbegun_gate_refuses_to_count() -> None:
    agent = Agent(cast(Any, OneCall("a")), tools=[lookup])
    session = agent.session()
    gate = session.safety.limits.budget
    assert gate.spent("turns") == 0  # read before any run: nothing spent
    assert gate.snapshot()["spent"]["turns"] == 0
    with pytest.raises(TypeError):  # an unbegun gate counts into no shared mapping
        BudgetGate._unbegun(None, lambda: 0.0).record_turn()
    await session.run("go")
    await session.run("again")
    assert session.safety.limits.budget.spent("turns") == 2  # the second run's, not four
    made = BudgetGate()  # a gate made by hand is begun: it counts at once
    made.record_turn()
    assert made.spent("turns") == 1


async def test_an_override_block_holds_for_its_runs_only() -> None:
    own, swapped = OneCall("own"), OneCall("swapped")
    agent = Agent(cast(Any, own), tools=[lookup])
    session = agent.session()
    with agent.override(model=cast(Any, swapped)):
        inside = await session.run("go")
    outside = await agent.session().run("go")
    after = await session.run("go")
    assert (inside.output, outside.output, after.output) == ("swapped", "own", "own")
    assert len(swapped.requests) == 2 and len(own.requests) == 4


class Counting(Hook):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def post_tool(self, call: Any, result: Any, ctx: Any) -> None:
        self.calls.append(call.name)


async def test_what_sessions_share_follows_a_change_of_the_agent() -> None:
    hook = Counting()
    agent = Agent(cast(Any, OneCall("a")), tools=[lookup], hooks=[hook])
    before = agent.session()
    await before.run("go")
    assert hook.calls == ["lookup"]
    agent.config = RunConfig(headless=False)  # the config the next sessions are made with
    later = agent.session()
    assert later._dispatcher.gates is not before._dispatcher.gates
    assert later._dispatcher.gates.headless is False and before._dispatcher.gates.headless
    assert later._dispatcher.config is agent.config
    await later.run("go")
    assert hook.calls == ["lookup", "lookup"]
    assert later._dispatcher._gate is None and before._dispatcher._gate is None
    agent.config = RunConfig(budget=Budget(turns=5))  # a line: each session's gate made at once
    drawn = agent.session()
    assert drawn._dispatcher._gate is not None and later._dispatcher._gate is None
    agent.config = RunConfig()
    assert agent.session()._dispatcher._gate is None  # (what the agent keeps follows it)


def test_a_detector_makes_its_window_at_its_first_operation_and_shares_none() -> None:
    from agentloop.safety.loops import LoopDetector

    first, second = LoopDetector(), LoopDetector()
    assert first._window is second._window  # neither has seen an operation: nothing made
    first.record("lookup", {"key": "k"}, "v", is_error=False)
    assert first._window is not second._window and len(first._window) == 1
    assert second._window == []  # the shared empty one was never written to
    first.record("lookup", {"key": "k"}, "v", is_error=False)
    assert len(first._window) == 2
    first.reset()
    first.record("lookup", {"key": "k"}, "v", is_error=False)
    assert len(first.snapshot()["window"]) == 1 and second.snapshot()["window"] == []
    first.reset()
    second.record("lookup", {"key": "k"}, "v", is_error=False)
    assert first.snapshot()["window"] == [] and len(second.snapshot()["window"]) == 1


async def test_a_session_makes_what_a_plain_run_never_needs_only_when_needed() -> None:
    agent = Agent(cast(Any, OneCall("a")), tools=[lookup])
    session = agent.session()
    safety = session.safety
    assert safety is session._dispatcher and session._bus is safety.limits is safety.bus
    assert safety._loops is None and safety._convergence is None  # nothing made yet
    assert safety.limits._gate is None  # the default budget draws no line: no gate
    await session.run("go")
    assert safety._loops is None and safety._op_tool == "lookup"  # one call kept, no detector
    assert safety._convergence is None and safety._answer == "a"  # one answer kept, no detector
    assert safety.limits._gate is None
    assert safety.limits.budget.spent("tool_calls") == 1  # asked for: made, holding the spend
    assert safety.loops.snapshot()["window"] and safety.convergence.streak == 1
    assert safety._op_tool is None and safety._answer is None  # handed to the detectors made


async def test_a_detector_is_made_at_a_session_s_second_operation_holding_the_first() -> None:
    agent = Agent(cast(Any, OneCall("a")), tools=[lookup])
    kept, made = agent.session(), agent.session()
    for session in (kept, made):
        await session.run("go")
    made_loops, made_convergence = made.safety.loops, made.safety.convergence  # asked for
    assert made.safety._loops is made_loops and made.safety._convergence is made_convergence
    assert len(made_loops.snapshot()["window"]) == 1 and made_convergence.streak == 1  # handed
    assert kept.safety._loops is None and kept.safety._convergence is None
    for session in (kept, made):
        await session.run("go")  # a second call and a second answer: made, the first first
    assert kept.safety.loops.snapshot() == made.safety.loops.snapshot()
    assert kept.safety.convergence.snapshot() == made.safety.convergence.snapshot()
    assert kept.safety.convergence.streak == 2 and len(kept.safety.loops._window) == 2


async def test_a_session_s_dispatcher_is_its_limits_gate_and_event_channel_with_no_cycle() -> None:
    import gc

    from agentloop.engine.dispatch import Dispatcher
    from agentloop.engine.limits import Limits
    from agentloop.observers import EventBus

    agent = Agent(cast(Any, OneCall("a")), tools=[lookup], config=RunConfig(max_tool_calls=3))
    session = agent.session()
    dispatcher = session._dispatcher
    assert isinstance(dispatcher, Limits) and isinstance(dispatcher, EventBus)
    assert dispatcher.limits is dispatcher.bus is dispatcher.observers is dispatcher
    assert session._bus is dispatcher and dispatcher.session_id == session.id
    assert dispatcher not in gc.get_referents(dispatcher)  # no reference to itself: no cycle
    await session.run("go")
    assert type(dispatcher) is Dispatcher and dispatcher.tool_calls == 1  # its own count
    assert dispatcher.max_tool_calls == 3 and dispatcher.budget.spent("tool_calls") == 1
    assert dispatcher not in gc.get_referents(dispatcher)


async def test_a_sessions_list_of_runs_is_made_at_its_second_run() -> None:
    """A session's first run holds no list of runs across its waits; ``runs`` reads alike."""
    from agentloop.testing import FunctionModel, reply

    agent = Agent(FunctionModel(lambda request: reply("done")))
    session = agent.session()
    assert (session.runs, session.current_run, session._runs) == ([], None, None)
    first = await session.run("one")
    assert session._runs is None
    assert session.runs == [first] and session.current_run is first
    assert repr(session).endswith(": 1 runs>")
    second = await session.run("two")
    assert session._runs == [first, second] and session.runs == [first, second]
    assert session.current_run is second and session.runs is not session._runs
    assert repr(session).endswith(": 2 runs>")
