"""Per-tool circuit breakers: sustained sick failures become a temporary soft refusal."""

from __future__ import annotations

from dataclasses import dataclass

from agentloop.safety._config import require_non_negative

__all__ = ["ToolBreaker"]


@dataclass(frozen=True, slots=True)
class ToolBreaker:
    """Open after ``failure_threshold`` consecutive sick failures (0 never opens)."""

    failure_threshold: int = 3
    recovery_seconds: float = 30.0
    probe_timeout: float = 30.0

    def __post_init__(self) -> None:
        for name in ("failure_threshold", "recovery_seconds", "probe_timeout"):
            require_non_negative("ToolBreaker", name, getattr(self, name))
