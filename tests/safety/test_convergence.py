"""Convergence detector: Jaccard of word sets, streaks, empty replies, actions."""

from __future__ import annotations

import pytest

from agentloop.errors import ConfigurationError, LoopDetected, UserInputRequired
from agentloop.safety.convergence import (
    Convergence,
    ConvergenceDetector,
    ConvergenceStatus,
    convergence_error,
    jaccard,
    word_set,
)

ANSWER = "The answer is forty two."


def test_defaults_match_the_contract() -> None:
    assert Convergence() == Convergence(threshold=0.95, count=3, action="warn")


def test_word_set_lowercases_and_strips_punctuation() -> None:
    assert word_set("Hello, WORLD! Don't  stop_me.") == {"hello", "world", "dont", "stopme"}
    assert word_set("  ... !!! ") == frozenset()


def test_jaccard() -> None:
    assert jaccard(frozenset("ab"), frozenset("bc")) == pytest.approx(1 / 3)
    assert jaccard(frozenset(), frozenset()) == 1.0


def test_three_identical_replies_converge() -> None:
    detector = ConvergenceDetector(Convergence())
    assert detector.record(ANSWER) is None
    assert detector.record(ANSWER.upper()) is None
    assert detector.record(ANSWER + "!!") == ConvergenceStatus(3, 1.0, "warn")


def test_the_streak_keeps_reporting_after_it_is_reached() -> None:
    detector = ConvergenceDetector()
    for _ in range(3):
        detector.record(ANSWER)
    status = detector.record(ANSWER)
    assert status is not None and status.streak == 4


def test_similarity_exactly_at_the_threshold_counts_and_just_below_does_not() -> None:
    # 19 shared words of 20 -> Jaccard 0.95 exactly; 18 of 20 -> 0.9.
    words = [f"w{i}" for i in range(20)]
    at = ConvergenceDetector(Convergence(threshold=0.95, count=2))
    at.record(" ".join(words[:19]))
    status = at.record(" ".join(words))
    assert status is not None and status.similarity == pytest.approx(0.95)
    below = ConvergenceDetector(Convergence(threshold=0.95, count=2))
    below.record(" ".join(words[:18]))
    assert below.record(" ".join(words)) is None


def test_a_dissimilar_reply_reseeds_the_streak_at_one() -> None:
    detector = ConvergenceDetector()
    detector.record(ANSWER)
    detector.record(ANSWER)
    detector.record("something else entirely")
    assert detector.streak == 1
    assert detector.record("something else entirely") is None
    assert detector.record("something else entirely") is not None


def test_an_empty_reply_resets_the_streak() -> None:
    # Bug history: empty replies did not reset the streak.
    detector = ConvergenceDetector()
    detector.record(ANSWER)
    detector.record(ANSWER)
    assert detector.record("") is None
    assert detector.streak == 0
    assert detector.record(ANSWER) is None
    assert detector.record(ANSWER) is None
    assert detector.record(ANSWER) is not None


@pytest.mark.parametrize("empty", ["", "   \n", "...?!"])
def test_replies_without_words_count_as_empty(empty: str) -> None:
    detector = ConvergenceDetector(Convergence(count=2))
    detector.record(ANSWER)
    detector.record(empty)
    assert detector.record(ANSWER) is None


def test_the_comparison_is_with_the_immediately_previous_reply_only() -> None:
    detector = ConvergenceDetector(Convergence(count=2))
    detector.record(ANSWER)
    detector.record("different words here")
    assert detector.record(ANSWER) is None


def test_count_zero_disables() -> None:
    detector = ConvergenceDetector(Convergence(count=0))
    assert [detector.record(ANSWER) for _ in range(10)] == [None] * 10


def test_state_persists_across_runs_until_reset() -> None:
    detector = ConvergenceDetector(Convergence(action="stop"))
    detector.record(ANSWER)  # run 1
    detector.record(ANSWER)  # run 2
    status = detector.record(ANSWER)  # run 3
    assert status is not None and status.action == "stop"
    detector.reset()
    assert detector.record(ANSWER) is None


def test_convergence_errors() -> None:
    stop = convergence_error("stop")
    assert isinstance(stop, LoopDetected)
    assert stop.message == "agent stopped: convergence detected"
    ask = convergence_error("ask_user")
    assert isinstance(ask, UserInputRequired)
    assert ask.message == "convergence detected, user input needed"
    assert convergence_error("warn") is None


@pytest.mark.parametrize(
    "kwargs", [{"threshold": 1.01}, {"threshold": -0.1}, {"count": 1}, {"action": "compact"}]
)
def test_invalid_config_is_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        Convergence(**kwargs)  # type: ignore[arg-type]
