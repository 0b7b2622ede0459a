"""The detectors' deferred work answers exactly as the eager work would, whatever the calls.

A loop detector makes its window, counts and live results at its first operation. A session's
safety state keeps its first operation and its first answer as given, and makes a detector only
when a second one (or a snapshot) needs it (``SafetyState.loop_record`` and ``converge``). One
operation or answer can neither warn nor stop (a threshold of 1 aside, which records at once),
so every answer is the eager one: these tests hold each to a detector that records at once,
through any sequence of calls.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.clock import Clock
from agentloop.config import RunConfig
from agentloop.engine.guards import SafetyState
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


def _safety(config: RunConfig) -> SafetyState:
    return SafetyState(config, (), "s", Clock())


def test_one_call_makes_nothing_and_a_threshold_of_one_records_at_once() -> None:
    lazy = _safety(RunConfig())
    assert lazy.loop_record("read", {"p": 1}, "x", is_error=True, available=True) is None
    assert lazy._loops is None and lazy._op_tool == "read"  # kept as given, no detector
    assert len(lazy.loops.snapshot()["window"]) == 1 and lazy._op_tool is None  # handed over
    eager = _safety(RunConfig(loop_detection=LoopDetection(warn_threshold=1, stop_threshold=3)))
    warning = eager.loop_record("read", {"p": 1}, "x", is_error=False, available=True)
    assert warning is not None and warning.repetitions == 1
    stops = _safety(RunConfig(loop_detection=LoopDetection(warn_threshold=0, stop_threshold=1)))
    stops.loop_record("read", {"p": 1}, "x", is_error=False, available=True)
    assert stops.loops.check() is not None


_RECORDS = st.lists(
    st.tuples(
        st.sampled_from(["read", "write"]),
        st.integers(0, 2),
        st.sampled_from(["", "a", "b"]),
        st.booleans(),
        st.booleans(),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(config=_LOOP_CONFIGS, records=_RECORDS)
def test_a_session_s_kept_first_operation_answers_as_a_detector(
    config: LoopDetection, records: list[tuple[Any, ...]]
) -> None:
    safety, eager = _safety(RunConfig(loop_detection=config)), LoopDetector(config)
    for tool, arg, text, is_error, available in records:
        said = eager.record(tool, {"p": arg}, text, is_error=is_error, available=available)
        kept = safety.loop_record(tool, {"p": arg}, text, is_error, available)
        assert _said(kept) == _said(said)
        got = None if safety._loops is None else safety.loops.check()  # (the engine's pre-check)
        assert _said(got) == _said(eager.check())
    assert safety.loops.snapshot() == eager.snapshot()


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


def test_one_answer_keeps_its_text_and_splits_no_words() -> None:
    safety = _safety(RunConfig())
    assert safety.converge("The answer is 42.") is None
    assert safety._convergence is None and safety._answer == "The answer is 42."
    assert safety.convergence.streak == 1 and safety._answer is None  # handed over
    assert safety.convergence._previous == frozenset({"the", "answer", "is", "42"})


@settings(max_examples=200, deadline=None)
@given(config=_CONVERGENCE_CONFIGS, replies=st.lists(_REPLIES, max_size=8))
def test_a_session_s_kept_first_answer_answers_as_a_detector(
    config: Convergence, replies: list[str]
) -> None:
    safety, eager = _safety(RunConfig(convergence=config)), ConvergenceDetector(config)
    for text in replies:
        assert safety.converge(text) == eager.record(text)
    assert safety.convergence.snapshot() == eager.snapshot()
