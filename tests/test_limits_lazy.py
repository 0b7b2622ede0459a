"""A budget with no line makes no gate: ``Limits`` counts its spend, exactly as the gate would.

The gate is made when somebody asks for it (``limits.budget``: a snapshot, a child's shared
budget, the rate governor's wall clock), holding what was counted, and counts from then on.
These tests hold a session's limits to the eager ones (a gate made at once), through any
sequence of runs, turns, calls, usage, reads, runs with budgets of their own and continued runs.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop import RunConfig
from agentloop.engine.limits import Limits
from agentloop.messages import ToolCallPart, Usage
from agentloop.run import Run, Turn
from agentloop.safety.budget import Budget
from agentloop.testing import FakeClock

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("begin"), st.sampled_from([None, None, Budget(tool_calls=1)])),
        st.tuples(st.just("before_request"), st.integers(0, 3)),
        st.tuples(st.just("admit_tools"), st.integers(0, 2)),
        st.tuples(st.just("spent"), st.integers(0, 20), st.integers(0, 20)),
        st.tuples(st.just("advance"), st.integers(0, 5)),
        st.tuples(st.just("continue"), st.integers(0, 2), st.booleans()),
        st.tuples(
            st.sampled_from(["turn_done", "turn_done", "end_run", "snapshot", "spent_turns"])
        ),
    ),
    max_size=30,
)
_BUDGETS = st.sampled_from(
    [Budget(), Budget(), Budget(turns=2), Budget(tokens=30, soft_fraction=0.5)]
)


def _said(value: object) -> object:
    return (type(value), str(value)) if isinstance(value, Exception) else value


def _run(turns: int) -> Run[Any]:
    run: Run[Any] = Run(id="r", input="x")
    for index in range(turns):
        call = ToolCallPart(f"c{index}", "t", {})
        run.turns.append(Turn(index=index, model="m", tool_calls=[call]))
    return run


def _call(limits: Limits, op: tuple[Any, ...], clock: FakeClock, saved: dict[str, Any]) -> object:
    name, *args = op
    if name == "before_request":
        limits.before_request(Run(id="r", input="x"), args[0])
        return None
    if name == "spent":
        limits.spent(Usage(args[0], args[1]), "m")
        return None
    if name == "advance":
        clock.advance(args[0])
        return None
    if name == "snapshot":
        return limits.budget.snapshot()
    if name == "spent_turns":
        return limits.budget.spent("turns")
    if name == "continue":
        limits.continue_run(_run(args[0]), saved.get("snapshot") if args[1] else None)
        return None
    return getattr(limits, name)(*args)


def _step(limits: Limits, op: tuple[Any, ...], clock: FakeClock, saved: dict[str, Any]) -> object:
    try:
        return _said(_call(limits, op, clock, saved))
    except Exception as exc:
        return _said(exc)


@settings(max_examples=1000, deadline=None)
@given(budget=_BUDGETS, ops=_OPS)
def test_limits_without_a_gate_count_as_the_gate_would(
    budget: Budget, ops: list[tuple[Any, ...]]
) -> None:
    config = RunConfig(budget=budget, max_tool_calls=4)
    told: tuple[list[Any], list[Any]] = ([], [])
    clocks = (FakeClock(), FakeClock())
    made = []
    for seen, clock in zip(told, clocks, strict=True):
        limits = Limits(config, (), "s", clock.monotonic)
        limits.attach(seen.append)
        made.append(limits)
    lazy, eager = made
    assert eager.budget is not None  # the gate made at once: what every session did before
    saved: dict[str, Any] = {}
    for op in [("begin", None), *ops]:  # (a session's runs begin first)
        said = _step(eager, op, clocks[1], saved)
        assert _step(lazy, op, clocks[0], saved) == said, op
        assert (lazy.tool_calls, lazy.budget_on) == (eager.tool_calls, eager.budget_on)
        if op[0] == "snapshot" and isinstance(said, dict):
            saved["snapshot"] = said
    assert [repr(e) for e in told[0]] == [repr(e) for e in told[1]]
    assert lazy.budget.snapshot() == eager.budget.snapshot()


def test_a_budget_without_lines_makes_no_gate_until_asked() -> None:
    limits = Limits(RunConfig(), (), "s", FakeClock().monotonic)
    limits.begin()
    limits.spent(Usage(10, 5), "m")
    limits.admit_tools(2)
    limits.turn_done()
    assert limits._gate is None
    gate = limits.budget
    assert limits._gate is gate and gate.spent("tokens") == 15 and gate.spent("tool_calls") == 2
    limits.turn_done()
    assert gate.spent("turns") == 2
    drawn = Limits(RunConfig(budget=Budget(turns=3)), (), "s", FakeClock().monotonic)
    assert drawn._gate is not None
