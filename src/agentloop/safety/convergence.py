"""Convergence detection: near-identical terminal replies in a row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentloop.errors import ConfigurationError

__all__ = ["Convergence"]


@dataclass(frozen=True, slots=True)
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
