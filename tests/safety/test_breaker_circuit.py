"""The one breaker state machine (``Circuit``) under the tool rule and the model rule."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentloop.safety.breaker import BreakerState, Circuit, CircuitRule, wall_shift

TOOL = CircuitRule(threshold=3, cooldown=30.0, probe_lease=30.0)
MODEL = CircuitRule(
    threshold=3, cooldown=60.0, probes_to_close=2, single_probe=False, recount_when_probing=True
)


def state(circuit: Circuit) -> BreakerState:
    """The state, read afresh (mypy would keep a narrowed ``circuit.state`` across calls)."""
    return circuit.state


def opened(rule: CircuitRule, at: float = 100.0) -> Circuit:
    circuit = Circuit()
    for _ in range(rule.threshold):
        assert circuit.admit(rule, at) is False
        circuit.record(rule, at, success=False)
    assert circuit.state == "open" and circuit.opened_at == at
    return circuit


def test_threshold_failures_open_and_a_success_resets_the_count() -> None:
    circuit = Circuit()
    circuit.record(TOOL, 0.0, success=False)
    circuit.record(TOOL, 0.0, success=False)
    circuit.record(TOOL, 0.0, success=True)
    circuit.record(TOOL, 0.0, success=False)
    assert circuit.state == "closed" and circuit.consecutive_failures == 1


def test_a_tool_circuit_admits_one_probe_and_a_sick_probe_reopens() -> None:
    circuit = opened(TOOL)
    assert circuit.admit(TOOL, 129.0) is None and circuit.cooldown_left(TOOL, 129.0) == 1.0
    assert circuit.admit(TOOL, 130.0) is True
    assert circuit.admit(TOOL, 130.0) is None and not circuit.would_admit(TOOL, 130.0)
    circuit.record(TOOL, 131.0, success=False)
    assert (circuit.state, circuit.opened_at, circuit.consecutive_failures) == ("open", 131.0, 4)


def test_a_lost_tool_probe_reopens_at_the_lease_end() -> None:
    circuit = opened(TOOL)
    assert circuit.admit(TOOL, 130.0) is True
    assert circuit.settled(TOOL, 160.0) == ("open", 160.0)
    assert circuit.state == "half_open"  # settled is pure
    assert circuit.admit(TOOL, 160.0) is None and state(circuit) == "open"
    circuit.lose_probe(TOOL)
    assert circuit.opened_at == 130.0 - TOOL.cooldown


def test_a_model_circuit_admits_everyone_while_probing_and_needs_two_successes() -> None:
    circuit = opened(MODEL)
    assert circuit.admit(MODEL, 160.0) is True
    assert circuit.consecutive_failures == 0  # probing counts afresh
    assert circuit.admit(MODEL, 160.0) is True and circuit.would_admit(MODEL, 160.0)
    circuit.record(MODEL, 161.0, success=True)
    assert circuit.state == "half_open" and circuit.probe_successes == 1
    circuit.record(MODEL, 162.0, success=True)
    assert state(circuit) == "closed" and circuit.probe_successes == 0


def test_soft_failures_while_probing_count_to_the_threshold_and_a_hard_one_reopens() -> None:
    circuit = opened(MODEL)
    circuit.admit(MODEL, 160.0)
    circuit.record(MODEL, 160.0, success=True)
    circuit.record(MODEL, 161.0, success=False, hard=False)
    assert (circuit.state, circuit.probe_successes, circuit.consecutive_failures) == (
        "half_open",
        0,
        1,
    )
    circuit.record(MODEL, 162.0, success=False, hard=True)
    assert circuit.state == "open" and circuit.opened_at == 162.0


def test_results_while_open_change_nothing_but_a_stale_failure_restarts_the_cooldown() -> None:
    circuit = Circuit()
    admitted_in = circuit.generation
    circuit = opened(TOOL)
    circuit.record(TOOL, 110.0, success=True)
    circuit.record(TOOL, 110.0, success=True, generation=admitted_in)
    assert circuit.state == "open" and circuit.opened_at == 100.0
    circuit.record(TOOL, 120.0, success=False, generation=admitted_in)
    assert circuit.state == "open" and circuit.opened_at == 120.0


@given(
    opened_at=st.floats(0, 1e6, allow_nan=False),
    cooldown=st.floats(0, 1e4, allow_nan=False),
    wait=st.floats(0, 2e4, allow_nan=False),
)
def test_a_refusal_always_has_a_cooldown_left_and_an_admission_never_does(
    opened_at: float, cooldown: float, wait: float
) -> None:
    # FallbackExhausted.retry_after is the least cooldown left: it must be > 0 when refused.
    rule = CircuitRule(threshold=1, cooldown=cooldown, single_probe=False)
    circuit = Circuit("open", opened_at=opened_at)
    now = opened_at + wait
    left = circuit.cooldown_left(rule, now)
    assert circuit.would_admit(rule, now) == (left == 0.0)
    assert (circuit.admit(rule, now) is None) == (left > 0.0)


def test_wall_shift_turns_a_clock_reading_into_wall_time() -> None:
    assert wall_shift(lambda: 10.0, 1000.0) == 990.0
