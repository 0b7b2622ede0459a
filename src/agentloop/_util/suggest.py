"""Did-you-mean: suggest the registered tool name closest to a mistyped one."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["SUGGESTION_THRESHOLD", "similarity", "suggest"]

SUGGESTION_THRESHOLD = 0.4


def _lcs_length(a: str, b: str) -> int:
    previous = [0] * (len(b) + 1)
    for char_a in a:
        current = [0]
        for j, char_b in enumerate(b):
            current.append(
                previous[j] + 1 if char_a == char_b else max(previous[j + 1], current[j])
            )
        previous = current
    return previous[-1]


def similarity(a: str, b: str) -> float:
    """LCS length over the longer length, plus 0.1 x common prefix / longer (lowercased)."""
    a, b = a.lower(), b.lower()
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    longer = max(len(a), len(b))
    prefix = 0
    for char_a, char_b in zip(a, b, strict=False):
        if char_a != char_b:
            break
        prefix += 1
    score = _lcs_length(a, b) / longer
    if prefix:
        score += 0.1 * prefix / longer
    return score


def suggest(
    name: str, candidates: Iterable[str], threshold: float = SUGGESTION_THRESHOLD
) -> str | None:
    """The best candidate scoring >= ``threshold`` (ties keep the first), else None."""
    best: str | None = None
    best_score = threshold
    for candidate in candidates:
        if candidate == name:
            continue
        score = similarity(name, candidate)
        if score > best_score or (best is None and score >= best_score):
            best, best_score = candidate, score
    return best
