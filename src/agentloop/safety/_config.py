"""Shared validation for the safety config values (``0`` disables a threshold)."""

from __future__ import annotations

from agentloop.errors import ConfigurationError


def require_non_negative(owner: str, name: str, value: float) -> None:
    """Raise ``ConfigurationError`` naming the field when ``value`` is negative or NaN."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        raise ConfigurationError(f"{owner}.{name} must be >= 0, got {value!r}", field=name)
