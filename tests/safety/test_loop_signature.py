"""``LoopDetector.record`` computes a signature inline (two calls fewer an attempt, issue 39).

The property: whatever the arguments and the result text, the signature it keeps (and a
``snapshot`` stores) is exactly ``(tool, canonical_arguments(arguments), result_digest(text))``,
the public functions' values, so stored windows written before and after stay comparable.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentloop.safety.loops import LoopDetector, canonical_arguments, result_digest

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.binary(max_size=4),  # not JSON: the encoder's default (repr)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=4), inner, max_size=3),
    ),
    max_leaves=8,
)
_keys = st.one_of(st.text(max_size=6), st.integers(), st.booleans(), st.none(), st.floats())
_arguments = st.dictionaries(_keys, _values, max_size=4)  # mixed key types: the repr fallback
_texts = st.one_of(st.text(), st.sampled_from(["", "\ud800 lone surrogate", "é"]))


def _kept(detector: LoopDetector) -> list[Any]:
    data = detector.snapshot()
    return [data["sigs"][i] for i in data["window"]]


@settings(max_examples=300, deadline=None)
@given(tool=st.text(min_size=1, max_size=5), arguments=_arguments, text=_texts)
def test_a_recorded_signature_is_the_public_functions_values(
    tool: str, arguments: dict[Any, Any], text: str
) -> None:
    detector = LoopDetector()
    detector.record(tool, arguments, text, is_error=False)
    expected = [tool, canonical_arguments(arguments), result_digest(text)]
    assert _kept(detector) == [expected]


def test_a_circular_argument_is_signed_as_canonical_arguments_signs_it() -> None:
    arguments: dict[str, Any] = {"a": 1}
    arguments["self"] = arguments
    detector = LoopDetector()
    detector.record("t", arguments, "x", is_error=False)
    assert _kept(detector) == [["t", canonical_arguments(arguments), result_digest("x")]]


def test_an_unavailable_name_is_one_pattern_whatever_its_arguments() -> None:
    detector = LoopDetector()
    detector.record("gone", {"a": 1}, "no such tool", is_error=True, available=False)
    assert _kept(detector) == [["gone", "*", None]]
