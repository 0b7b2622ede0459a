"""The detectors' deferred work answers exactly as the eager work would, whatever the calls.

A loop detector keeps its first operation as given (no encoding, no window) until a second one
or a snapshot needs it; a convergence detector keeps its first reply's text until the next reply
or a snapshot needs its words. One operation or reply can neither warn nor stop (a threshold of 1
aside, which records at once), so every answer is the eager one: these tests hold each to a
detector that settles at once, through any sequence of calls.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.safety import loops
from agentloop.safety.convergence import (
    Convergence,
    ConvergenceDetector,
    ConvergenceStatus,
    jaccard,
    word_set,
)
from agentloop.safety.loops import LoopDetection, LoopDetector

_LOOP_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("record"),
            st.sampled_from(["read", "write"]),
            st.integers(0, 2),
            st.sampled_from(["", "a", "b"]),
            st.booleans(),
            st.booleans(),
        ),
        st.tuples(st.sampled_from(["check", "consume_stop", "end_run", "snapshot", "reset"])),
        st.tuples(st.just("restore")),
    ),
    max_size=40,
)
_LOOP_CONFIGS = st.one_of(
    st.builds(
        LoopDetection,
        warn_threshold=st.integers(0, 3),
        stop_threshold=st.integers(0, 4),
        window=st.integers(1, 6),
    ),
    st.just(LoopDetection(warn_threshold=0, stop_threshold=0, window=0)),
)


class _EagerLoops(LoopDetector):
    """A detector that records every operation at once (what ``record`` did before)."""

    def record(self, *args: Any, **kwargs: Any) -> Any:
        if self._live_hash is loops._NO_LIVE:  # a window of its own: nothing is kept
            self._own()
        return super().record(*args, **kwargs)


def _said(value: object) -> object:
    return (type(value), str(value)) if isinstance(value, Exception) else value


def _loop_call(detector: LoopDetector, op: tuple[Any, ...], saved: dict[str, Any]) -> object:
    name = op[0]
    if name == "record":
        _, tool, arg, text, is_error, available = op
        return detector.record(tool, {"p": arg}, text, is_error=is_error, available=available)
    if name == "snapshot":
        return detector.snapshot()
    if name == "restore":
        detector.restore(saved["snapshot"])
        return None
    return getattr(detector, name)()


@settings(max_examples=400, deadline=None)
@given(config=_LOOP_CONFIGS, ops=_LOOP_OPS)
def test_a_loop_detector_answers_as_the_eager_one(
    config: LoopDetection, ops: list[tuple[Any, ...]]
) -> None:
    lazy, eager = LoopDetector(config), _EagerLoops(config)
    saved: dict[str, Any] = {"snapshot": LoopDetector(config).snapshot()}
    for op in ops:
        said = _said(_loop_call(eager, op, saved))
        assert _said(_loop_call(lazy, op, saved)) == said, op
        assert _said(lazy.check()) == _said(eager.check())
        if op[0] == "snapshot":
            saved["snapshot"] = said
    assert lazy.snapshot() == eager.snapshot()


def test_one_call_makes_nothing_and_a_threshold_of_one_records_at_once() -> None:
    lazy = LoopDetector()
    assert lazy.record("read", {"p": 1}, "x", is_error=True) is None
    assert lazy._first_tool == "read" and lazy.check() is None
    assert len(lazy.snapshot()["window"]) == 1 and lazy._first_tool is None
    eager = LoopDetector(LoopDetection(warn_threshold=1, stop_threshold=3))
    warning = eager.record("read", {"p": 1}, "x", is_error=False)
    assert warning is not None and warning.repetitions == 1
    stops = LoopDetector(LoopDetection(warn_threshold=0, stop_threshold=1))
    stops.record("read", {"p": 1}, "x", is_error=False)
    assert stops.check() is not None


_REPLIES = st.sampled_from(["", "...", "The answer is 42.", "the ANSWER is 42", "Something else."])
_CONVERGENCE_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("record"), _REPLIES),
        st.tuples(st.sampled_from(["streak", "snapshot", "reset", "restore", "repr"])),
    ),
    max_size=30,
)
_CONVERGENCE_CONFIGS = st.builds(
    Convergence,
    threshold=st.sampled_from([0.0, 0.5, 0.95, 1.0]),
    count=st.sampled_from([0, 2, 3]),
    action=st.sampled_from(["warn", "stop"]),
)


class _EagerConvergence(ConvergenceDetector):
    """A detector that takes every reply's words at once (``record`` as it was before)."""

    def record(self, text: str) -> Any:
        if not self.config.count:
            return None
        words = word_set(text)
        if not words:
            self.reset()
            return None
        previous = self._previous
        similarity = 0.0 if previous is None else jaccard(previous, words)
        if previous is not None and similarity >= self.config.threshold:
            self._streak += 1
        else:
            self._streak = 1
        self._previous = words
        if self._streak < self.config.count:
            return None
        return ConvergenceStatus(self._streak, similarity, self.config.action)


def _convergence_call(
    detector: ConvergenceDetector, op: tuple[Any, ...], saved: dict[str, Any]
) -> object:
    name = op[0]
    if name == "record":
        return detector.record(op[1])
    if name == "streak":
        return detector.streak
    if name == "repr":
        return repr(detector)
    if name == "restore":
        detector.restore(saved["snapshot"])
        return None
    return getattr(detector, name)()


@settings(max_examples=300, deadline=None)
@given(config=_CONVERGENCE_CONFIGS, ops=_CONVERGENCE_OPS)
def test_a_convergence_detector_answers_as_the_eager_one(
    config: Convergence, ops: list[tuple[Any, ...]]
) -> None:
    lazy, eager = ConvergenceDetector(config), _EagerConvergence(config)
    saved: dict[str, Any] = {"snapshot": ConvergenceDetector(config).snapshot()}
    for op in ops:
        said = _convergence_call(eager, op, saved)
        assert _convergence_call(lazy, op, saved) == said, op
        if op[0] == "snapshot":
            saved["snapshot"] = said
    assert lazy.snapshot() == eager.snapshot() and lazy.streak == eager.streak


def test_one_reply_keeps_its_text_and_splits_no_words() -> None:
    detector = ConvergenceDetector()
    assert detector.record("The answer is 42.") is None
    assert detector._first == "The answer is 42." and detector._previous is None
    assert detector.streak == 1 and detector._previous == frozenset({"the", "answer", "is", "42"})
