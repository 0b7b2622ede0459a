"""``_numbers``: one rule for configured numbers, and every constructor applying it alike."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from agentloop._util.numbers import is_finite, require_number
from agentloop.config import RunConfig
from agentloop.errors import ConfigurationError
from agentloop.pricing import Price
from agentloop.providers.fallback import FallbackClient
from agentloop.providers.retrying import RetryPolicy
from agentloop.providers.settings import Settings
from agentloop.safety.breaker import ToolBreaker
from agentloop.safety.budget import Budget
from agentloop.safety.recovery import ExponentialBackoffRecovery
from agentloop.testing import ScriptedModel
from agentloop.tools import tool

REFUSED = [True, False, math.nan, math.inf, -math.inf, "1", None]


@pytest.mark.parametrize("value", [0, 1, -2, 0.5, 1e300, -0.0])
def test_finite_ints_and_floats_are_numbers(value: float) -> None:
    assert is_finite(value)


@pytest.mark.parametrize("value", REFUSED)
def test_bools_nan_infinities_and_non_numbers_are_not(value: object) -> None:
    assert not is_finite(value)


def test_require_number_names_the_field_in_the_callers_words() -> None:
    with pytest.raises(ConfigurationError) as info:
        require_number(-1, "Thing.delay", field="delay")
    assert info.value.field == "delay"
    assert str(info.value) == "Thing.delay must be a finite number >= 0, got -1"
    with pytest.raises(ConfigurationError) as positive:
        require_number(0, "Thing.timeout", field="timeout", rule="positive", positive=True)
    assert str(positive.value) == "Thing.timeout must be positive, got 0"
    require_number(0, "Thing.delay", field="delay")
    require_number(2.5, "Thing.delay", field="delay", minimum=2.5)


MAKERS: dict[str, Callable[[Any], object]] = {
    "RunConfig.tool_timeout": lambda v: RunConfig(tool_timeout=v),
    "RetryPolicy.base_delay": lambda v: RetryPolicy(base_delay=v),
    "Settings.timeout": lambda v: Settings(provider="openai", api_key="k", timeout=v).validate(),
    "FallbackClient.cooldown": lambda v: FallbackClient([ScriptedModel([])], cooldown=v),
    "ToolBreaker.recovery_seconds": lambda v: ToolBreaker(recovery_seconds=v),
    "Budget.wall_clock": lambda v: Budget(wall_clock=v),
    "Price.input_per_million": lambda v: Price(v, 1.0),
    "ExponentialBackoffRecovery.base_delay": lambda v: ExponentialBackoffRecovery(base_delay=v),
    "tool.timeout": lambda v: tool(timeout=v)(_noop),
}


def _noop() -> str:
    """Do nothing."""
    return ""


@pytest.mark.parametrize("value", [True, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", sorted(MAKERS))
def test_every_configured_number_refuses_bools_nan_and_infinities(
    where: str, value: object
) -> None:
    with pytest.raises(ConfigurationError) as info:
        MAKERS[where](value)
    assert info.value.field == where.split(".")[1]
