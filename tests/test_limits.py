"""The one limits gate (``agentloop.engine.limits``): turns, tool calls, tokens, cost, clock."""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import Agent, Observer, RunConfig, tool
from agentloop import events as ev
from agentloop.engine.limits import Limits
from agentloop.errors import BudgetExhausted, LockPoisoned, MaxTurnsExceeded, ToolLimitReached
from agentloop.messages import ToolCallPart, Usage
from agentloop.run import Run, Turn
from agentloop.safety.budget import Budget
from agentloop.testing import FakeClock, ScriptedModel, call, reply


def gate(clock: FakeClock | None = None, **config: Any) -> tuple[Limits, list[ev.Event]]:
    seen: list[ev.Event] = []
    limits = Limits(RunConfig(**config), (), "", (clock or FakeClock()).monotonic)
    limits.attach(seen.append)  # the limits gate is the session's event channel too
    limits.begin()
    return limits, seen


def test_max_turns_refuses_the_request_past_the_line() -> None:
    limits, _ = gate(max_turns=2)
    run: Run[Any] = Run(id="r", input="x")
    limits.before_request(run, 0)
    limits.before_request(run, 1)
    with pytest.raises(MaxTurnsExceeded) as info:
        limits.before_request(run, 2)
    assert info.value.max == 2


def test_tool_calls_are_capped_per_turn_and_per_run_with_one_counter() -> None:
    limits, _ = gate(max_tool_calls=3, max_tool_calls_per_turn=2)
    with pytest.raises(ToolLimitReached, match="turn tool-call limit of 2"):
        limits.admit_tools(3)
    limits.admit_tools(2)
    with pytest.raises(ToolLimitReached, match=r"run tool-call limit of 3 reached \(2 made"):
        limits.admit_tools(2)
    limits.admit_tools(1)
    assert limits.tool_calls == 3
    assert limits.budget.spent("tool_calls") == 3


def test_the_budget_warns_once_then_refuses_on_the_wall_clock() -> None:
    clock = FakeClock()
    limits, seen = gate(clock, budget=Budget(wall_clock=10, soft_fraction=0.5))
    run: Run[Any] = Run(id="r", input="x")
    clock.advance(6)
    limits.before_request(run, 3)
    limits.before_request(run, 4)
    warnings = [e for e in seen if isinstance(e, ev.BudgetWarning)]
    assert [(w.dimension, w.turn) for w in warnings] == [("wall_clock", 3)]
    clock.advance(4)
    with pytest.raises(BudgetExhausted) as info:
        limits.before_request(run, 5)
    assert info.value.dimension == "wall_clock"


def test_usage_and_turns_feed_the_budget() -> None:
    limits, _ = gate(budget=Budget(tokens=100, turns=5))
    limits.spent(Usage(input_tokens=30, output_tokens=20), "m")
    limits.turn_done()
    assert limits.budget.spent("tokens") == 50
    assert limits.budget.spent("turns") == 1


def test_a_raising_budget_is_lock_poisoned_until_the_next_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limits, _ = gate(max_turns=1, budget=Budget(tokens=1))
    broken = limits.budget

    def boom() -> None:
        raise RuntimeError("broken gate")

    monkeypatch.setattr(broken, "pre_request", boom)
    run: Run[Any] = Run(id="r", input="x")
    with pytest.raises(LockPoisoned) as info:
        limits.before_request(run, 0)
    assert info.value.what == "budget" and isinstance(info.value.__cause__, RuntimeError)
    assert not limits.budget_on
    with pytest.raises(LockPoisoned):  # poisoned: every later step of this run fails too
        limits.turn_done()
    with pytest.raises(MaxTurnsExceeded):  # the plain caps still hold first
        limits.before_request(run, 1)
    monkeypatch.undo()
    limits.begin()  # a new run rebuilds the counts: the gate is trusted again
    assert limits.budget_on
    limits.before_request(run, 0)


@pytest.mark.parametrize("step", ["record_usage", "record_turn", "record_tool_calls"])
def test_a_raising_budget_update_is_lock_poisoned(
    step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits, _ = gate(budget=Budget(tokens=100))

    def boom(*args: Any) -> None:
        raise ValueError("bad arithmetic")

    monkeypatch.setattr(limits.budget, step, boom)
    with pytest.raises(LockPoisoned) as info:
        limits.spent(Usage(input_tokens=1), "m")
        limits.turn_done()
        limits.admit_tools(1)
    assert isinstance(info.value.__cause__, ValueError)


def test_a_continued_run_keeps_its_tool_calls_and_turns() -> None:
    limits, _ = gate(max_tool_calls=4)
    run: Run[Any] = Run(id="r", input="x")
    run.turns = [
        Turn(index=i, model="m", tool_calls=[ToolCallPart(f"c{i}", "a", {})]) for i in range(3)
    ]
    limits.continue_run(run, limits.budget.snapshot())
    limits.begin()
    assert limits.tool_calls == 3
    assert limits.budget.spent("turns") == 3
    with pytest.raises(ToolLimitReached):
        limits.admit_tools(2)
    limits.begin()  # the next run starts from zero
    assert limits.tool_calls == 0


class Seen(Observer):
    def __init__(self, seen: list[ev.Event]) -> None:
        self.seen = seen

    def on_event(self, event: ev.Event) -> None:
        self.seen.append(event)


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


async def test_an_agent_reads_time_and_ids_from_its_clock() -> None:
    clock = FakeClock()
    seen: list[ev.Event] = []
    steps = [call("ping"), reply("done")]
    agent = Agent(ScriptedModel(steps), tools=[ping], clock=clock, observers=[Seen(seen)])
    run = await agent.run("go")
    assert agent.session_id == f"{1:032x}"
    assert run.id == f"{2:032x}"
    assert run.started_at == run.ended_at == clock.time()
    finished = [e for e in seen if isinstance(e, ev.ToolCallFinished)]
    assert [e.duration for e in finished] == [0.0]
