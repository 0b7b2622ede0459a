"""Tool circuit breakers: opening, the single probe, leases, stale results, health stats."""

from __future__ import annotations

from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.errors import ConfigurationError
from agentloop.safety.breaker import Admission, Outcome, ToolBreaker, ToolBreakers, health_status


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(**kwargs: Any) -> tuple[ToolBreakers, FakeClock]:
    clock = FakeClock()
    return ToolBreakers(ToolBreaker(**kwargs), clock=clock), clock


def fail(breakers: ToolBreakers, n: int, tool: str = "t") -> None:
    for _ in range(n):
        admission = breakers.admit(tool)
        assert admission is not None
        breakers.record(admission, "sick")


def opened(**kwargs: float) -> tuple[ToolBreakers, FakeClock]:
    breakers, clock = make(**kwargs)
    fail(breakers, 3)
    assert breakers.admit("t") is None
    return breakers, clock


def test_defaults_match_the_contract() -> None:
    assert ToolBreaker() == ToolBreaker(
        failure_threshold=3, recovery_seconds=30.0, probe_timeout=30.0
    )


def test_opens_after_exactly_three_consecutive_sick_failures() -> None:
    breakers, _ = make()
    fail(breakers, 2)
    assert breakers.would_admit("t") and breakers.health("t").state == "closed"
    fail(breakers, 1)
    assert not breakers.would_admit("t")
    assert breakers.admit("t") is None
    assert breakers.health("t").state == "open"


def test_a_success_or_neutral_result_resets_the_consecutive_count() -> None:
    for outcome in ("success", "neutral"):
        breakers, _ = make()
        fail(breakers, 2)
        admission = breakers.admit("t")
        assert admission is not None
        breakers.record(admission, outcome)
        fail(breakers, 2)
        assert breakers.health("t").state == "closed"


def test_neutral_results_never_open_the_breaker() -> None:
    # The typo story of seed 000: a model's bad input can never lock a tool.
    breakers, _ = make()
    for _ in range(50):
        admission = breakers.admit("t")
        assert admission is not None
        breakers.record(admission, "neutral")
    health = breakers.health("t")
    assert health.state == "closed" and health.failures == 0 and health.total_calls == 50


def test_failure_threshold_zero_never_opens() -> None:
    # Bug history: failure_threshold 0 was inverted (tripped on the first failure).
    breakers, _ = make(failure_threshold=0)
    fail(breakers, 100)
    health = breakers.health("t")
    assert health.state == "closed" and health.consecutive_failures == 100


def test_breakers_are_per_tool() -> None:
    breakers, _ = opened()
    assert breakers.admit("other") is not None


def test_the_probe_is_admitted_at_exactly_the_cooldown_and_not_before() -> None:
    breakers, clock = opened()
    clock.now += 29.999
    assert not breakers.would_admit("t") and breakers.admit("t") is None
    clock.now += 0.001
    assert breakers.would_admit("t")
    probe = breakers.admit("t")
    assert probe is not None and probe.probe
    assert breakers.health("t").state == "half_open"


def test_only_one_probe_runs_the_others_are_refused() -> None:
    breakers, clock = opened()
    clock.now += 30
    assert breakers.admit("t") is not None
    assert not breakers.would_admit("t")
    assert [breakers.admit("t") for _ in range(5)] == [None] * 5


@pytest.mark.parametrize("outcome", ["success", "neutral"])
def test_probe_success_closes(outcome: Outcome) -> None:
    breakers, clock = opened()
    clock.now += 30
    probe = breakers.admit("t")
    assert probe is not None
    breakers.record(probe, outcome)
    health = breakers.health("t")
    assert health.state == "closed" and health.consecutive_failures == 0
    assert breakers.admit("t") is not None


def test_probe_failure_reopens_with_a_fresh_cooldown() -> None:
    breakers, clock = opened()
    clock.now += 30
    probe = breakers.admit("t")
    assert probe is not None
    clock.now += 5
    breakers.record(probe, "sick")
    assert breakers.health("t").state == "open"
    clock.now += 29.9
    assert breakers.admit("t") is None
    clock.now += 0.1
    assert breakers.admit("t") is not None


def test_a_success_arriving_while_open_does_not_close_it() -> None:
    # Bug history: a success from a call admitted before the trip closed the breaker.
    breakers, _ = make()
    early = breakers.admit("t")
    assert early is not None
    fail(breakers, 3)
    breakers.record(early, "success")
    assert breakers.health("t").state == "open"
    assert breakers.admit("t") is None


def test_a_stale_failure_while_open_restarts_the_cooldown() -> None:
    breakers, clock = make()
    early = breakers.admit("t")
    assert early is not None
    fail(breakers, 3)
    clock.now += 20
    breakers.record(early, "sick")
    clock.now += 10
    assert breakers.admit("t") is None
    clock.now += 20
    assert breakers.admit("t") is not None


def test_a_lost_probe_is_released_after_the_lease() -> None:
    # Bug history: a probe that never reported wedged the breaker half-open forever.
    breakers, clock = opened()
    clock.now += 30
    lost = breakers.admit("t")
    assert lost is not None
    clock.now += 29.999
    assert breakers.admit("t") is None
    clock.now += 0.001  # the lease ends: open, cooldown counted from the lease end
    assert breakers.health("t").state == "open"
    assert breakers.admit("t") is None
    clock.now += 29.999
    assert not breakers.would_admit("t")
    clock.now += 0.001
    assert breakers.would_admit("t")
    second = breakers.admit("t")
    assert second is not None and second.probe
    breakers.record(lost, "success")  # the late, lost probe: stale, never closes
    assert breakers.health("t").state == "half_open"
    breakers.record(second, "success")
    assert breakers.health("t").state == "closed"


def test_probe_timeout_zero_disables_the_lease() -> None:
    breakers, clock = opened(probe_timeout=0)
    clock.now += 30
    probe = breakers.admit("t")
    assert probe is not None
    clock.now += 10_000
    assert breakers.admit("t") is None
    breakers.record(probe, "success")
    assert breakers.health("t").state == "closed"


def test_release_hands_the_probe_slot_back_at_once() -> None:
    breakers, clock = opened()
    clock.now += 30
    probe = breakers.admit("t")
    assert probe is not None
    breakers.release(probe)
    assert breakers.health("t").state == "open"
    again = breakers.admit("t")
    assert again is not None and again.probe
    breakers.release(Admission("t", False, 0))  # a non-probe release is a no-op
    breakers.release(probe)  # a stale release is a no-op
    assert breakers.health("t").state == "half_open"


def test_recovery_zero_probes_immediately() -> None:
    breakers, _ = make(recovery_seconds=0)
    fail(breakers, 3)
    probe = breakers.admit("t")
    assert probe is not None and probe.probe


def test_would_admit_is_pure() -> None:
    # Bug history: the availability oracle consumed the probe slot.
    breakers, clock = opened()
    clock.now += 30
    for _ in range(3):
        assert breakers.would_admit("t")
    assert breakers.health("t").state == "open"
    assert breakers.admit("t") is not None


def test_health_statistics() -> None:
    breakers, _ = make(failure_threshold=0)
    unseen = breakers.health("new")
    assert unseen.status == "healthy" and unseen.score == 1.0 and unseen.total_calls == 0
    outcomes: list[Outcome] = ["success", "sick", "sick", "neutral"]
    for outcome in outcomes:
        admission = breakers.admit("t")
        assert admission is not None
        breakers.record(admission, outcome)
    health = breakers.health("t")
    ewma = ((1.0 * 0.7 + 0.3) * 0.7) * 0.7
    assert health.ewma_success == pytest.approx(ewma)
    assert health.success_rate == pytest.approx(1 / 3)
    assert health.score == pytest.approx(0.3 / 3 + 0.7 * ewma)
    assert (health.total_calls, health.successes, health.failures) == (4, 1, 2)
    assert health.status == "unhealthy"  # 0.1 + 0.343
    assert list(breakers.health_summary()) == ["t"]


def test_health_status_boundaries() -> None:
    assert health_status(0.8) == "healthy"
    assert health_status(0.7999) == "degraded"
    assert health_status(0.5) == "degraded"
    assert health_status(0.4999) == "unhealthy"


def test_one_failure_after_one_success_is_degraded_and_never_blocks() -> None:
    breakers, _ = make(failure_threshold=0)
    for outcome in ("success", "sick"):
        admission = breakers.admit("t")
        assert admission is not None
        breakers.record(admission, outcome)
    health = breakers.health("t")
    assert health.score == pytest.approx(0.3 * 0.5 + 0.7 * 0.7)
    assert health.status == "degraded"
    for _ in range(10):
        fail(breakers, 1)
    assert breakers.health("t").status == "unhealthy"
    assert breakers.admit("t") is not None


@pytest.mark.parametrize("field", ["failure_threshold", "recovery_seconds", "probe_timeout"])
def test_negative_config_is_rejected(field: str) -> None:
    with pytest.raises(ConfigurationError):
        ToolBreaker(**{field: -1})


@settings(max_examples=300, deadline=None)
@given(
    actions=st.lists(
        st.one_of(
            st.just(("admit", 0.0)),
            st.tuples(st.sampled_from(["success", "sick", "neutral", "lose"]), st.just(0.0)),
            st.tuples(st.just("tick"), st.sampled_from([0.0, 1.0, 10.0, 29.999, 30.0, 31.0])),
        ),
        max_size=80,
    ),
    probe_timeout=st.sampled_from([0.0, 5.0, 30.0]),
    recovery=st.sampled_from([0.0, 10.0, 30.0]),
)
def test_never_two_live_probes_and_the_oracle_agrees(
    actions: list[tuple[str, float]], probe_timeout: float, recovery: float
) -> None:
    breakers, clock = make(
        failure_threshold=2, recovery_seconds=recovery, probe_timeout=probe_timeout
    )
    outstanding: list[tuple[Admission, float]] = []
    for action, value in actions:
        if action == "tick":
            clock.now += value
        elif action == "admit":
            expected = breakers.would_admit("t")
            state = breakers.health("t").state
            admission = breakers.admit("t")
            assert (admission is not None) == expected
            if admission is not None:
                assert admission.probe == (state != "closed")
                outstanding.append((admission, clock.now))
        elif outstanding:
            admission, _ = outstanding.pop(0)
            if action != "lose":
                breakers.record(admission, cast(Outcome, action))
        live = [
            a
            for a, at in outstanding
            if a.probe and (probe_timeout == 0 or clock.now < at + probe_timeout)
        ]
        assert len(live) <= 1


def test_a_closed_breaker_admits_with_one_shared_admission_per_generation() -> None:
    breakers, clock = make()
    first, second = breakers.admit("t"), breakers.admit("t")
    assert first is second and first == Admission("t", False, 0)
    fail(breakers, 3)  # open (a new generation) ...
    clock.now += 30
    probe = breakers.admit("t")
    assert probe is not None and probe.probe
    breakers.record(probe, "success")  # ... and closed again: another generation
    closed = breakers.admit("t")
    assert closed is not None and not closed.probe and closed.generation > first.generation
    breakers.record(first, "sick")  # a stale failure from a closed generation counts nothing
    assert breakers.health("t").consecutive_failures == 0


def test_a_success_while_closed_never_reads_the_clock() -> None:
    reads = 0

    def clock() -> float:
        nonlocal reads
        reads += 1
        return 1000.0

    breakers = ToolBreakers(ToolBreaker(), clock=clock)
    outcomes: list[Outcome] = ["sick", "success", "neutral", "sick"]
    for outcome in outcomes:
        admission = breakers.admit("t")
        assert admission is not None
        breakers.record(admission, outcome)
    assert reads == 2  # the two sick results only: a closed breaker may open on them
    assert breakers.health("t").consecutive_failures == 1
