"""``_util.jsontext``: the same text as ``json.dumps``, whatever the value."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentloop._util.jsontext import encoder, flat_object

SCALARS = st.one_of(
    st.text(),
    st.integers(),
    st.booleans(),
    st.none(),
    st.floats(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)
KEYS = st.one_of(st.text(), st.integers(), st.booleans(), st.none())


@given(value=st.dictionaries(KEYS, SCALARS, max_size=5), ascii_only=st.booleans())
def test_flat_object_writes_what_json_dumps_writes_or_says_none(
    value: dict[Any, Any], ascii_only: bool
) -> None:
    quote = json.encoder.encode_basestring_ascii if ascii_only else json.encoder.encode_basestring
    text = flat_object(value, quote)
    expected = json.dumps(value, ensure_ascii=ascii_only)
    flat = all(type(k) is str for k in value) and all(
        type(v) in (str, int, bool, type(None)) for v in value.values()
    )
    assert text == (expected if flat else None)


def test_flat_object_of_the_common_values() -> None:
    value = {"key": 'k\u00e9 "q" \n', "n": -3, "yes": True, "no": False, "none": None}
    assert flat_object(value, json.encoder.encode_basestring) == json.dumps(
        value, ensure_ascii=False
    )
    assert flat_object({}, json.encoder.encode_basestring_ascii) == "{}"
    assert flat_object({"x": 1.5}, json.encoder.encode_basestring_ascii) is None


@given(value=st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=8))
def test_encoder_writes_what_json_dumps_writes(value: Any) -> None:
    assert encoder(ensure_ascii=False)(value) == json.dumps(value, ensure_ascii=False)
