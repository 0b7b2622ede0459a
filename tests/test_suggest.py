"""Did-you-mean similarity."""

import pytest

from agentloop._util.suggest import similarity, suggest


def test_worked_example() -> None:
    assert similarity("read_fille", "read_file") == pytest.approx(0.98)


def test_edges() -> None:
    assert similarity("", "") == 1.0 and similarity("a", "") == 0.0
    assert similarity("READ", "read") == 1.0


def test_threshold_and_ties() -> None:
    assert suggest("read_fille", ["write_file", "read_file"]) == "read_file"
    assert suggest("zzz", ["read_file", "write_file"]) is None
    assert suggest("ab", ["ax", "ay"]) == "ax"


def test_threshold_is_inclusive() -> None:
    # "abcd" vs "wxcd": LCS 2 / 4 = 0.5, no prefix
    assert suggest("abcd", ["wxcd"], threshold=0.5) == "wxcd"
    assert suggest("abcd", ["wxcd"], threshold=0.51) is None
