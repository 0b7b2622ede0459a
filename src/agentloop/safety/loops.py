"""Loop detection: identical (tool, arguments, result) operations repeated in a window."""

from __future__ import annotations

from dataclasses import dataclass

from agentloop.errors import ConfigurationError
from agentloop.safety._config import require_non_negative

__all__ = ["LoopDetection"]


@dataclass(frozen=True, slots=True)
class LoopDetection:
    """Warn at ``warn_threshold`` identical operations, stop at ``stop_threshold`` (0 disables)."""

    warn_threshold: int = 3
    stop_threshold: int = 10
    window: int = 50

    def __post_init__(self) -> None:
        for name in ("warn_threshold", "stop_threshold", "window"):
            require_non_negative("LoopDetection", name, getattr(self, name))
        if self.window == 0 and (self.warn_threshold or self.stop_threshold):
            raise ConfigurationError("LoopDetection.window must be >= 1", field="window")
