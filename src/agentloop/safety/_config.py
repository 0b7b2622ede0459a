"""Shared validation for the safety config values (``0`` disables a threshold)."""

from __future__ import annotations

from agentloop._util.numbers import require_number


def require_non_negative(owner: str, name: str, value: float) -> None:
    """Raise ``ConfigurationError`` naming the field unless ``value`` is a finite number >= 0."""
    require_number(value, f"{owner}.{name}", field=name, rule=">= 0")


def require_non_negative_fields(config: object, *names: str) -> None:
    """``require_non_negative`` for each named field of a config dataclass."""
    for name in names:
        require_non_negative(type(config).__name__, name, getattr(config, name))
