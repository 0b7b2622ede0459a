"""Recovery values and the default strategy: one attempt by default, a bounded ladder."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop.errors import ConfigurationError
from agentloop.safety.recovery import (
    MAX_RECOVERY_ATTEMPTS,
    AskUser,
    Correction,
    ExponentialBackoffRecovery,
    Fail,
    FailureAnalysis,
    NoopReflector,
    Reflector,
    Retry,
    ToolFailure,
)

RECOVERABLE = FailureAnalysis(is_recoverable=True, root_cause="flaky")


def failure(attempt: int = 0) -> ToolFailure:
    return ToolFailure("t", {"a": 1}, "boom", None, attempt)


def test_the_ceiling_is_five_retries() -> None:
    assert MAX_RECOVERY_ATTEMPTS == 5
    assert failure().max_attempts == 5


async def test_the_noop_reflector_never_asks_for_a_retry() -> None:
    reflector = NoopReflector()
    assert isinstance(reflector, Reflector)
    analysis = await reflector.analyze(failure())
    assert analysis == FailureAnalysis(is_recoverable=False, root_cause="boom")
    assert analysis.severity == "medium" and analysis.correction is None
    assert reflector == NoopReflector() and hash(reflector) == hash(NoopReflector())


async def test_stock_defaults_mean_one_attempt_per_call() -> None:
    analysis = await NoopReflector().analyze(failure())
    assert isinstance(ExponentialBackoffRecovery().decide(analysis, 0, 5), Fail)


def test_backoff_ladder_is_100_200_400_ms_then_gives_up() -> None:
    strategy = ExponentialBackoffRecovery(max_retries=3)
    delays = [strategy.decide(RECOVERABLE, attempt, 5) for attempt in range(3)]
    assert delays == [Retry(0.1), Retry(0.2), Retry(0.4)]
    assert isinstance(strategy.decide(RECOVERABLE, 3, 5), Fail)


def test_delays_are_capped() -> None:
    strategy = ExponentialBackoffRecovery(max_retries=50, base_delay=1.0, max_delay=30.0)
    assert strategy.decide(RECOVERABLE, 4, 50) == Retry(16.0)
    assert strategy.decide(RECOVERABLE, 5, 50) == Retry(30.0)


def test_high_severity_with_a_correction_asks_the_user() -> None:
    analysis = FailureAnalysis(True, "x", "high", Correction(kind="guidance", guidance="g"))
    assert isinstance(ExponentialBackoffRecovery().decide(analysis, 0, 5), AskUser)
    without = FailureAnalysis(True, "x", "high", None)
    assert isinstance(ExponentialBackoffRecovery().decide(without, 0, 5), Retry)


def test_max_attempts_caps_a_generous_strategy() -> None:
    strategy = ExponentialBackoffRecovery(max_retries=100)
    assert isinstance(strategy.decide(RECOVERABLE, 4, 5), Retry)
    assert isinstance(strategy.decide(RECOVERABLE, 5, 5), Fail)


def test_invalid_config_is_rejected() -> None:
    with pytest.raises(ConfigurationError):
        ExponentialBackoffRecovery(max_retries=-1)
    with pytest.raises(ConfigurationError):
        ExponentialBackoffRecovery(base_delay=-0.1)


analyses = st.builds(
    FailureAnalysis,
    is_recoverable=st.booleans(),
    root_cause=st.text(max_size=5),
    severity=st.sampled_from(["low", "medium", "high", "critical"]),
    correction=st.none() | st.builds(Correction, kind=st.sampled_from(["input_fix", "guidance"])),
)


@given(
    max_retries=st.integers(0, 1000),
    base_delay=st.floats(0, 100),
    max_delay=st.floats(0, 100),
    sequence=st.lists(st.tuples(analyses, st.integers(0, 50)), max_size=30),
)
def test_no_config_retries_at_or_past_the_ceiling(
    max_retries: int,
    base_delay: float,
    max_delay: float,
    sequence: list[tuple[FailureAnalysis, int]],
) -> None:
    strategy = ExponentialBackoffRecovery(max_retries, base_delay, max_delay)
    for analysis, attempt in sequence:
        action = strategy.decide(analysis, attempt, MAX_RECOVERY_ATTEMPTS)
        if attempt >= MAX_RECOVERY_ATTEMPTS:
            assert not isinstance(action, Retry)
        if isinstance(action, Retry):
            assert 0 <= action.delay <= max_delay
