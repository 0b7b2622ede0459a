"""One rule for a number given as configuration: an int or a float, never a bool, NaN or infinity.

Every constructor that validates a number (``RunConfig``, ``RetryPolicy``, ``Settings``,
``FallbackClient``, the safety configs, ``Price``, the token counters, records read back) asks
``is_finite`` or calls ``require_number``, so ``True``, NaN and the infinities are refused alike
everywhere. Each caller keeps its own words: the error reads ``<label> must be <rule>, got
<value>`` and names the field.

This module imports only ``errors``, so every layer may use it.
"""

from __future__ import annotations

import math
from typing import TypeGuard

from agentloop.errors import ConfigurationError

__all__ = ["is_finite", "require_number"]


def is_finite(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is an int or a float (a bool is not) that is neither NaN nor infinite."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def require_number(
    value: object,
    label: str,
    *,
    field: str,
    rule: str = "a finite number >= 0",
    minimum: float = 0.0,
    positive: bool = False,
) -> None:
    """Raise ``ConfigurationError`` unless ``value`` is finite and ``>= minimum``.

    Args:
        value: what was given.
        label: how the message names it (``"RetryingClient.max_delay"``).
        field: the ``ConfigurationError.field``.
        rule: what the message says it must be.
        minimum: the least value allowed.
        positive: the minimum itself is refused too (``> minimum``).
    """
    if not is_finite(value) or value < minimum or (positive and value == minimum):
        raise ConfigurationError(f"{label} must be {rule}, got {value!r}", field=field)
