"""Convergence detection: near-identical terminal replies in a row.

The answer-side twin of loop detection: a model that keeps giving the same final answer is not
adapting either. The detector compares each terminal reply (never an acting turn's preamble)
with the one before it by the Jaccard similarity of their word sets; ``count`` similar replies
in a row is convergence. The engine keeps one detector per agent, so the streak spans runs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, Literal

from agentloop._util.slots import record
from agentloop.errors import AgentLoopError, ConfigurationError, LoopDetected, UserInputRequired

__all__ = [
    "Convergence",
    "ConvergenceDetector",
    "ConvergenceStatus",
    "convergence_error",
    "jaccard",
    "word_set",
]

_NOT_A_WORD_CHARACTER = re.compile(r"[\W_]+")
_STRIPPED = functools.partial(_NOT_A_WORD_CHARACTER.sub, "")
"""A word without its punctuation (``"Don't!"`` -> ``"Dont"``)."""


@record
class Convergence:
    """Jaccard similarity >= ``threshold`` for ``count`` terminal replies in a row."""

    threshold: float = 0.95
    count: int = 3
    action: Literal["warn", "stop", "ask_user"] = "warn"

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigurationError(
                f"Convergence.threshold must be in [0, 1], got {self.threshold!r}",
                field="threshold",
            )
        if self.count != 0 and self.count < 2:
            raise ConfigurationError(
                f"Convergence.count must be 0 (off) or >= 2, got {self.count!r}", field="count"
            )
        if self.action not in ("warn", "stop", "ask_user"):
            raise ConfigurationError(
                f"Convergence.action must be warn, stop or ask_user, got {self.action!r}",
                field="action",
            )


@record
class ConvergenceStatus:
    """Convergence was detected: ``streak`` similar replies in a row, the last at ``similarity``."""

    streak: int
    similarity: float
    action: str


def word_set(text: str) -> frozenset[str]:
    """Lowercased words of ``text`` with punctuation removed (``"Don't!"`` -> ``"dont"``)."""
    return frozenset(filter(None, map(_STRIPPED, text.lower().split())))  # C loops, no generator


def jaccard(first: frozenset[str], second: frozenset[str]) -> float:
    """``|A & B| / |A | B|``; two empty sets are identical (1.0)."""
    union = len(first | second)
    return len(first & second) / union if union else 1.0


def convergence_error(action: str) -> AgentLoopError | None:
    """The hard error a convergence ``action`` ends the run with (None for ``warn``)."""
    if action == "stop":
        return LoopDetected("agent stopped: convergence detected")
    if action == "ask_user":
        return UserInputRequired("convergence detected, user input needed")
    return None


class ConvergenceDetector:
    """Tracks the streak of similar terminal replies.

    Args:
        config: similarity threshold, streak length (``0`` disables) and action.
    """

    def __init__(self, config: Convergence | None = None) -> None:
        self.config = config or Convergence()
        self._previous: frozenset[str] | None = None
        self._streak = 0

    def __repr__(self) -> str:
        return f"ConvergenceDetector({self.config!r}, streak={self.streak})"

    @property
    def streak(self) -> int:
        """Similar terminal replies in a row so far (0 after an empty reply or a reset)."""
        return self._streak

    def reset(self) -> None:
        """Forget the previous reply and the streak."""
        self._previous = None
        self._streak = 0

    def snapshot(self) -> dict[str, Any]:
        """The previous reply's words and the streak, as plain JSON data."""
        previous = None if self._previous is None else sorted(self._previous)
        return {"previous": previous, "streak": self._streak}

    def restore(self, data: Mapping[str, Any]) -> None:
        """Replace the state with a ``snapshot()``; raises ``ValueError`` on malformed data."""
        try:
            previous = data["previous"]
            streak = int(data["streak"])
            words = None if previous is None else frozenset(str(w) for w in previous)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a ConvergenceDetector snapshot: {exc!r}") from exc
        self._previous, self._streak = words, streak

    def record(self, text: str) -> ConvergenceStatus | None:
        """Feed one terminal reply; return a status when the streak reaches ``count``.

        A reply with no words (empty, blanks or punctuation only) resets the streak to 0 and
        forgets the previous reply. Once reached, every further similar reply reports again.
        """
        if not self.config.count:
            return None
        words = word_set(text)
        if not words:
            self.reset()
            return None
        similarity = 0.0 if self._previous is None else jaccard(self._previous, words)
        if self._previous is not None and similarity >= self.config.threshold:
            self._streak += 1
        else:
            self._streak = 1
        self._previous = words
        if self._streak < self.config.count:
            return None
        return ConvergenceStatus(self._streak, similarity, self.config.action)
