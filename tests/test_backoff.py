"""The one exponential backoff: doubling from ``base``, capped, never overflowing."""

from __future__ import annotations

import pytest

from agentloop._util.backoff import exponential_backoff


@pytest.mark.parametrize(
    ("attempt", "expected"), [(0, 0.1), (1, 0.2), (2, 0.4), (6, 6.4), (7, 10.0), (64, 10.0)]
)
def test_doubles_from_base_up_to_the_cap(attempt: int, expected: float) -> None:
    assert exponential_backoff(attempt, 0.1, 10.0) == pytest.approx(expected)


def test_a_huge_attempt_gives_the_cap_instead_of_overflowing() -> None:
    assert exponential_backoff(10**6, 0.1, 30.0) == 30.0
    assert exponential_backoff(5000, 3.0, 1e308) == 1e308


def test_a_zero_base_never_waits() -> None:
    assert exponential_backoff(100, 0.0, 30.0) == 0.0
