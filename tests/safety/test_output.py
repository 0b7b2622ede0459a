"""Output limits: the head is kept and the marker fits inside the budget."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop.errors import InvalidInput
from agentloop.safety.output import TRUNCATION_MARKER, limit_output

MARKER = "\n[truncated]"


def test_the_marker() -> None:
    assert TRUNCATION_MARKER == MARKER and len(MARKER) == 12


def test_zero_turns_the_limit_off() -> None:
    # Bug history: a limit of 0 reduced every output to the marker.
    assert limit_output("x" * 10_000, 0) == "x" * 10_000


def test_text_exactly_at_the_limit_is_unchanged_and_one_more_is_cut() -> None:
    assert limit_output("a" * 100, 100) == "a" * 100
    cut = limit_output("a" * 101, 100)
    assert cut == "a" * 88 + MARKER and len(cut) == 100


def test_the_marker_fits_inside_the_budget() -> None:
    # Bug history: the truncation marker was appended past the cap.
    for budget in range(13, 40):
        out = limit_output("b" * 50, budget)
        assert len(out) == budget and out.endswith(MARKER)


def test_a_budget_without_room_for_the_marker_returns_the_head_only() -> None:
    assert limit_output("abcdefghijklmnopqrstuvwxyz", 12) == "abcdefghijkl"
    assert limit_output("abcdefghijklmnopqrstuvwxyz", 13) == "a" + MARKER
    assert limit_output("abcdef", 3) == "abc"


def test_characters_are_never_split() -> None:
    text = "😀" * 20
    out = limit_output(text, 15)
    assert out == "😀" * 3 + MARKER
    accented = "e\u0301" * 10  # e + combining acute accent
    out = limit_output(accented, 17)
    assert out == "e\u0301" * 2 + MARKER  # the cut backs off rather than orphaning an accent
    family = "👨\u200d👩\u200d👧" * 3 + "x" * 20
    head = limit_output(family, 14).removesuffix(MARKER)
    assert not head.endswith("\u200d")


def test_a_negative_budget_is_rejected() -> None:
    with pytest.raises(InvalidInput):
        limit_output("x", -1)


@given(text=st.text(max_size=300), budget=st.integers(0, 400))
def test_never_longer_than_the_budget_and_always_a_prefix(text: str, budget: int) -> None:
    out = limit_output(text, budget)
    if budget == 0 or len(text) <= budget:
        assert out == text
    else:
        assert len(out) <= budget
        assert text.startswith(out.removesuffix(MARKER))
