"""Exponential backoff, written once: the wait before the n-th retry, doubling up to a cap.

``RetryingClient`` (``RetryPolicy.backoff``, which adds jitter), ``ExponentialBackoffRecovery``
(tool retries) and ``MCPServer``'s restarts (``restart_delay``) all wait
``min(base * 2**attempt, cap)``. Pure arithmetic: no clock, no sleep, nothing of ours imported,
so every layer may use it.
"""

from __future__ import annotations

__all__ = ["exponential_backoff"]

_MAX_EXPONENT = 1023
"""``2.0**1023`` is the largest power of two a float holds; past it the cap has long been met."""


def exponential_backoff(attempt: int, base: float, cap: float) -> float:
    """``min(base * 2**attempt, cap)``: the wait before retry ``attempt`` (0-based), in seconds.

    Args:
        attempt: How many retries came before this one (0 for the first).
        base: The first wait.
        cap: The longest wait.

    Returns:
        The wait; a huge ``attempt`` gives ``cap`` instead of overflowing.
    """
    return float(min(base * 2.0 ** min(attempt, _MAX_EXPONENT), cap))
