"""Loop detector: warn/stop thresholds, progress, window, alternation, cross-run hygiene."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.errors import ConfigurationError, LoopDetected
from agentloop.safety.loops import LoopDetection, LoopDetector, LoopWarning, canonical_arguments

ARGS = {"path": "/etc/hosts"}
PATTERN = 'read({"path":"/etc/hosts"})'


def same(
    detector: LoopDetector, n: int, result: str = "same", *, is_error: bool = False
) -> list[LoopWarning | None]:
    return [detector.record("read", ARGS, result, is_error=is_error) for _ in range(n)]


def dispatch_until_refused(detector: LoopDetector, limit: int = 100) -> int:
    """The engine's order: check before dispatch, record after. Returns calls executed."""
    for executed in range(limit):
        if detector.check() is not None:
            return executed
        detector.record("read", ARGS, "same", is_error=False)
    return limit


def test_defaults_match_the_contract() -> None:
    assert LoopDetection() == LoopDetection(warn_threshold=3, stop_threshold=10, window=50)


def test_ten_identical_calls_execute_and_the_eleventh_is_refused() -> None:
    detector = LoopDetector(LoopDetection())
    assert dispatch_until_refused(detector) == 10
    detected = detector.check()
    assert isinstance(detected, LoopDetected)
    assert detected.message == f"{PATTERN} repeated 10 times"
    assert str(detected) == f"Loop detected: {PATTERN} repeated 10 times"


def test_nine_identical_calls_are_below_the_stop() -> None:
    detector = LoopDetector()
    same(detector, 9)
    assert detector.check() is None
    same(detector, 1)
    assert detector.check() is not None


def test_check_is_pure_and_repeatable() -> None:
    detector = LoopDetector()
    same(detector, 10)
    first, second = detector.check(), detector.check()
    assert first is not None and second is not None
    assert first.message == second.message


def test_stop_threshold_zero_never_stops() -> None:
    # Bug history: stop_threshold 0 was inverted (stopped at the first detection).
    detector = LoopDetector(LoopDetection(stop_threshold=0))
    assert dispatch_until_refused(detector, limit=200) == 200
    assert detector.check() is None


def test_warn_threshold_zero_never_warns_but_still_stops() -> None:
    detector = LoopDetector(LoopDetection(warn_threshold=0))
    assert all(w is None for w in same(detector, 10))
    assert detector.check() is not None


def test_warning_fires_exactly_once_at_the_warn_threshold() -> None:
    detector = LoopDetector()
    results = same(detector, 9)
    assert results[:2] == [None, None]
    assert results[2] == LoopWarning(PATTERN, 3)
    assert results[3:] == [None] * 6


def test_polling_check_does_not_consume_the_warning() -> None:
    # Bug history: a monitor polling check_loop consumed the one-shot warning.
    detector = LoopDetector()
    same(detector, 2)
    for _ in range(5):
        assert detector.check() is None
    assert detector.record("read", ARGS, "same", is_error=False) == LoopWarning(PATTERN, 3)


def test_each_attempt_counts_once() -> None:
    # Bug history: every invocation was recorded twice (pre and post), halving the stop.
    detector = LoopDetector()
    same(detector, 5)
    assert detector.check() is None
    same(detector, 4)
    assert detector.check() is None


def test_no_warning_when_warn_is_not_below_stop() -> None:
    detector = LoopDetector(LoopDetection(warn_threshold=3, stop_threshold=3))
    assert same(detector, 3) == [None, None, None]
    assert detector.check() is not None


def test_a_changed_result_is_progress() -> None:
    detector = LoopDetector()
    for i in range(30):
        assert detector.check() is None
        detector.record("read", ARGS, f"line {i}", is_error=False)


def test_progress_after_a_warning_flushes_the_stale_entries() -> None:
    detector = LoopDetector()
    same(detector, 9, "pending")
    detector.record("read", ARGS, "done", is_error=False)
    same(detector, 8, "pending")
    assert detector.check() is None
    same(detector, 1, "pending")
    assert detector.check() is None
    same(detector, 1, "pending")
    assert detector.check() is not None


def test_different_arguments_with_identical_results_are_different_operations() -> None:
    detector = LoopDetector()
    for i in range(30):
        detector.record("read", {"path": f"/tmp/{i}"}, "same", is_error=False)
    assert detector.check() is None


def test_empty_results_of_the_same_call_are_identical() -> None:
    detector = LoopDetector()
    same(detector, 10, "")
    assert detector.check() is not None


def test_argument_order_does_not_matter() -> None:
    detector = LoopDetector()
    for i in range(10):
        args = {"a": 1, "b": 2} if i % 2 else {"b": 2, "a": 1}
        detector.record("t", args, "x", is_error=False)
    detected = detector.check()
    assert detected is not None
    assert detected.message == 't({"a":1,"b":2}) repeated 10 times'


def test_unavailable_names_form_one_pattern_whatever_the_arguments() -> None:
    detector = LoopDetector()
    for i in range(10):
        detector.record(
            "frobnicate",
            {"n": i},
            f"tool 'frobnicate' is not available {i}",
            is_error=True,
            available=False,
        )
    detected = detector.check()
    assert detected is not None
    assert detected.message == "frobnicate(*) repeated 10 times"


def test_window_slides_old_repetitions_out() -> None:
    detector = LoopDetector(LoopDetection(window=12))
    same(detector, 9)
    for i in range(3):
        detector.record("other", {"i": i}, "x", is_error=False)
    same(detector, 1)  # evicts one old entry: still 9 in the window
    assert detector.check() is None
    same(detector, 1)
    assert detector.check() is None
    detector = LoopDetector(LoopDetection(window=10))
    same(detector, 10)
    assert detector.check() is not None


def test_a_window_of_exactly_stop_entries_can_stop_and_one_less_cannot() -> None:
    at = LoopDetector(LoopDetection(stop_threshold=10, window=10))
    assert dispatch_until_refused(at) == 10
    below = LoopDetector(LoopDetection(stop_threshold=10, window=9))
    assert dispatch_until_refused(below, limit=50) == 50


def test_consume_stop_clears_the_pattern_for_the_next_run() -> None:
    detector = LoopDetector()
    same(detector, 10)
    detected = detector.consume_stop()
    assert detected is not None and "repeated 10 times" in detected.message
    assert detector.check() is None
    assert detector.consume_stop() is None


def test_end_run_drops_a_stop_pattern_the_run_never_fired() -> None:
    detector = LoopDetector()
    same(detector, 10)  # the model went terminal before an 11th call
    detector.end_run()
    assert detector.check() is None
    assert dispatch_until_refused(detector) == 10


def test_end_run_keeps_patterns_below_the_stop() -> None:
    detector = LoopDetector()
    same(detector, 9)
    detector.end_run()
    same(detector, 1)
    assert detector.check() is not None


def test_reset_forgets_everything() -> None:
    detector = LoopDetector()
    same(detector, 10)
    detector.reset()
    assert detector.check() is None
    assert same(detector, 3)[2] == LoopWarning(PATTERN, 3)


def test_warning_can_fire_again_after_the_pattern_left_the_window() -> None:
    detector = LoopDetector(LoopDetection(window=5))
    assert same(detector, 3)[2] is not None
    for i in range(5):
        detector.record("other", {"i": i}, "x", is_error=False)
    assert same(detector, 3)[2] == LoopWarning(PATTERN, 3)


def test_window_zero_with_thresholds_disabled_records_nothing() -> None:
    detector = LoopDetector(LoopDetection(warn_threshold=0, stop_threshold=0, window=0))
    assert same(detector, 20) == [None] * 20
    assert detector.check() is None


def test_window_zero_with_a_threshold_is_rejected() -> None:
    with pytest.raises(ConfigurationError):
        LoopDetection(window=0)
    with pytest.raises(ConfigurationError):
        LoopDetection(stop_threshold=-1)


def test_canonical_arguments_is_compact_and_sorted() -> None:
    assert canonical_arguments({"b": [1, 2], "a": "é"}) == '{"a":"\\u00e9","b":[1,2]}'
    assert canonical_arguments({"x": object}).startswith('{"x":"<class')


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=4), _JSON, max_size=4))
def test_canonical_arguments_is_json_dumps_sorted_and_compact(arguments: dict[str, object]) -> None:
    expected = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=repr)
    assert canonical_arguments(arguments) == expected


def test_circular_or_mixed_key_arguments_are_their_sorted_repr() -> None:
    looped: dict[str, object] = {}
    looped["self"] = looped
    assert canonical_arguments(looped) == "[('self', {'self': {...}})]"
    assert canonical_arguments({1: "a", "b": 2}) == "[(1, 'a'), ('b', 2)]"  # type: ignore[dict-item]


# Alternation of failing calls -------------------------------------------------------------


def alternate(
    detector: LoopDetector, calls: int, *, is_error: bool = True
) -> list[LoopWarning | None]:
    out: list[LoopWarning | None] = []
    for i in range(calls):
        if detector.check() is not None:
            break
        name = "a" if i % 2 == 0 else "b"
        out.append(detector.record(name, {}, f"{name} failed", is_error=is_error))
    return out


def test_failing_alternation_stops_after_stop_threshold_calls() -> None:
    detector = LoopDetector()
    assert len(alternate(detector, 100)) == 10
    detected = detector.check()
    assert detected is not None
    assert detected.message == "a({}) and b({}) alternating 5 times"


def test_nine_alternating_calls_are_below_the_stop() -> None:
    detector = LoopDetector()
    alternate(detector, 9)
    assert detector.check() is None


def test_failing_alternation_warns_once_at_warn_threshold_cycles() -> None:
    detector = LoopDetector(LoopDetection(warn_threshold=3, stop_threshold=0))
    warnings = [w for w in alternate(detector, 40) if w is not None]
    alternation = [w for w in warnings if "alternating" in w.pattern]
    assert alternation == [LoopWarning("a({}) and b({}) alternating", 3)]


def test_succeeding_alternation_is_not_flagged_as_alternation() -> None:
    detector = LoopDetector(LoopDetection(stop_threshold=12))
    assert len(alternate(detector, 22, is_error=False)) == 22
    assert detector.check() is None


def test_alternation_whose_results_change_is_progress() -> None:
    detector = LoopDetector()
    for i in range(60):
        assert detector.check() is None
        name = "a" if i % 2 == 0 else "b"
        detector.record(name, {}, f"{name} failed {i}", is_error=True)


def test_a_success_breaks_the_alternation() -> None:
    detector = LoopDetector()
    alternate(detector, 8)
    detector.record("c", {}, "ok", is_error=False)
    alternate(detector, 8)
    assert detector.check() is None


def test_consume_stop_clears_an_alternation() -> None:
    detector = LoopDetector()
    alternate(detector, 10)
    assert detector.consume_stop() is not None
    assert detector.check() is None
    assert len(alternate(detector, 100)) == 10


def test_end_run_drops_an_unfired_alternation() -> None:
    detector = LoopDetector()
    alternate(detector, 10)
    detector.end_run()
    assert detector.check() is None


# Properties --------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.integers(1, 3), min_size=1, max_size=120),
    stop=st.integers(2, 12),
    warn=st.integers(0, 5),
    window=st.integers(12, 60),
)
def test_identical_calls_with_changing_results_never_stop(
    steps: list[int], stop: int, warn: int, window: int
) -> None:
    # Each result differs from the one before (results may cycle): every call made progress.
    detector = LoopDetector(LoopDetection(warn_threshold=warn, stop_threshold=stop, window=window))
    value = 0
    for index, step in enumerate(steps):
        value = (value + step) % 4
        assert detector.check() is None
        detector.record("poll", {"id": 1}, f"r{value}", is_error=index % 3 == 0)


@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2), st.booleans()), max_size=200),
    window=st.integers(1, 30),
)
def test_counts_always_match_a_naive_recount(ops: list[tuple[int, int, bool]], window: int) -> None:
    stop = 4
    detector = LoopDetector(LoopDetection(warn_threshold=2, stop_threshold=stop, window=window))
    for tool, result, is_error in ops:
        detector.record(f"t{tool}", {}, f"r{result}", is_error=is_error)
        live = sum(detector._counts.values())
        dead = sum(detector._dead.values())
        assert live + dead == len(detector._window) <= window
        assert all(count > 0 for count in detector._counts.values())
        stopping = {s for s, n in detector._counts.items() if n >= stop}
        assert stopping == detector._at_stop


def test_each_detector_keeps_its_own_failing_tail_and_tombstones() -> None:
    """Detectors start from shared empty values (issue 39): one's tail never reaches another."""
    first, second = LoopDetector(), LoopDetector()
    alternate(first, 9)
    first.record("c", {}, "ok", is_error=False)  # a success ends the tail
    alternate(first, 3)
    assert first.snapshot()["alternation"]["length"] == 3
    assert second.check() is None
    assert second.snapshot()["alternation"] == LoopDetector().snapshot()["alternation"]
    assert second.snapshot()["dead"] == [] and second.snapshot()["window"] == []
    alternate(second, 9)
    assert second.check() is None and first.check() is None
