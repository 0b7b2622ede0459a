"""The loop window's stored form: compact, and exact on restore, whatever the calls were.

A durable store writes ``LoopDetector.snapshot()`` at every commit point, so the form is small
(each signature once, counts and live results derived on restore); stores of an older
agentloop hold the full form (``window``, ``counts``, ``live``), which still restores.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.safety.loops import LoopDetection, LoopDetector

_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("record"),
            st.sampled_from(["read", "write"]),
            st.integers(0, 2),
            st.sampled_from(["", "a", "b"]),
            st.booleans(),
            st.booleans(),
        ),
        st.tuples(st.sampled_from(["consume_stop", "end_run"])),
    ),
    max_size=60,
)
_CONFIGS = st.builds(
    LoopDetection,
    warn_threshold=st.integers(0, 3),
    stop_threshold=st.integers(0, 5),
    window=st.integers(1, 8),
)


def _said(value: object) -> object:
    """What a call returned, comparable (an exception by its class and message)."""
    return (type(value), str(value)) if isinstance(value, Exception) else value


def _apply(detector: LoopDetector, op: tuple[Any, ...]) -> object:
    return _said(_call(detector, op))


def _call(detector: LoopDetector, op: tuple[Any, ...]) -> object:
    if op[0] == "record":
        _, tool, arg, text, is_error, available = op
        return detector.record(tool, {"p": arg}, text, is_error=is_error, available=available)
    if op[0] == "consume_stop":
        return detector.consume_stop()
    detector.end_run()
    return None


def _state(detector: LoopDetector) -> dict[str, Any]:
    alternation = detector._alternation
    return {
        "window": list(detector._window),
        "counts": dict(detector._counts),
        "live": dict(detector._live_hash),
        "dead": dict(detector._dead),
        "warned": set(detector._warned),
        "at_stop": set(detector._at_stop),
        "alternation": (
            alternation.length,
            alternation.previous,
            alternation.before_previous,
            alternation.warned,
        ),
    }


def _full_form(detector: LoopDetector) -> dict[str, Any]:
    """What an older agentloop wrote: every window signature, count and live result in full."""
    alternation = detector._alternation
    return {
        "window": [list(s) for s in detector._window],
        "counts": [[*s, n] for s, n in detector._counts.items()],
        "live": [[*key, digest] for key, digest in detector._live_hash.items()],
        "dead": [[*s, n] for s, n in detector._dead.items()],
        "warned": [list(s) for s in detector._warned],
        "at_stop": [list(s) for s in detector._at_stop],
        "alternation": {
            "length": alternation.length,
            "previous": alternation.previous,
            "before_previous": alternation.before_previous,
            "warned": alternation.warned,
        },
    }


def _json(data: object) -> Any:
    return json.loads(json.dumps(data))


@settings(max_examples=300, deadline=None)
@given(config=_CONFIGS, before=_OPS, after=_OPS)
def test_a_restored_window_is_the_same_window(
    config: LoopDetection, before: list[tuple[Any, ...]], after: list[tuple[Any, ...]]
) -> None:
    first = LoopDetector(config)
    for op in before:
        _apply(first, op)
    compact, full = LoopDetector(config), LoopDetector(config)
    compact.restore(_json(first.snapshot()))
    full.restore(_json(_full_form(first)))
    assert _state(compact) == _state(first) == _state(full)
    assert compact.snapshot() == first.snapshot()
    for op in after:  # and they go on alike
        said = _apply(first, op)
        assert _apply(compact, op) == said and _apply(full, op) == said
        assert _said(compact.check()) == _said(first.check())
    assert _state(compact) == _state(first) == _state(full)


def test_each_signature_is_written_once() -> None:
    detector = LoopDetector()
    for i in range(50):
        detector.record("read", {"path": f"src/file_{i % 5}.py"}, "same text", is_error=False)
    data = detector.snapshot()
    assert len(data["sigs"]) == 5 and len(data["window"]) == 50
    assert "counts" not in data and "live" not in data
    assert len(json.dumps(data)) < len(json.dumps(_full_form(detector))) / 4


@pytest.mark.parametrize(
    "data",
    [
        {"sigs": [["t", "{}", None]], "window": [1], "dead": [], "warned": [], "at_stop": []},
        {"sigs": [["t", "{}", None]], "window": [-1], "dead": [], "warned": [], "at_stop": []},
        {"sigs": [["t", "{}", None]], "window": [True], "dead": [], "warned": [], "at_stop": []},
        {"sigs": [["t", "{}", None]], "window": [0], "dead": [[0, 2]], "warned": [], "at_stop": []},
        {"sigs": [["t", "{}", None]], "window": [0], "dead": [[0, 0]], "warned": [], "at_stop": []},
        {"sigs": [["t", "{}"]], "window": [], "dead": [], "warned": [], "at_stop": []},
    ],
)
def test_a_malformed_compact_form_is_refused_and_nothing_is_kept(data: dict[str, Any]) -> None:
    detector = LoopDetector()
    detector.record("read", {}, "x", is_error=False)
    data = {**data, "alternation": {"length": 0, "previous": None, "before_previous": None}}
    data["alternation"]["warned"] = False
    with pytest.raises(ValueError, match="not a LoopDetector snapshot"):
        detector.restore(data)
    assert detector.snapshot()["window"] == []
