"""The budget gate: refuse the next request once a run has spent its budget."""

from __future__ import annotations

from dataclasses import dataclass

from agentloop.errors import ConfigurationError
from agentloop.safety._config import require_non_negative

__all__ = ["Budget"]


@dataclass(frozen=True, slots=True)
class Budget:
    """Hard lines per run (None disables a line); one warning per dimension at ``soft_fraction``."""

    tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None
    wall_clock: float | None = None
    tool_calls: int | None = None
    soft_fraction: float = 0.8

    def __post_init__(self) -> None:
        for name in ("tokens", "output_tokens", "turns", "wall_clock", "tool_calls"):
            value = getattr(self, name)
            if value is not None:
                require_non_negative("Budget", name, value)
        if not 0.0 < self.soft_fraction <= 1.0:
            raise ConfigurationError(
                f"Budget.soft_fraction must be in (0.0, 1.0], got {self.soft_fraction!r}",
                field="soft_fraction",
            )
