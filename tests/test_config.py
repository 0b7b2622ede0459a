"""RunConfig: spec defaults, and ConfigurationError naming the field for bad values."""

from typing import Any

import pytest

from agentloop import ModelSettings, RunConfig
from agentloop.context import TruncatingCompactor
from agentloop.errors import ConfigurationError
from agentloop.safety import (
    Budget,
    Convergence,
    ExponentialBackoffRecovery,
    LoopDetection,
    NoopReflector,
    ToolBreaker,
)
from agentloop.tokens import HeuristicTokenCounter


def test_defaults_match_the_spec() -> None:
    config = RunConfig()
    assert config.max_turns == 200 and config.stream is False
    assert config.parallel_tool_calls is False and config.max_concurrency == 8
    assert config.tool_timeout == 120.0 and config.suggest_tools is True
    assert config.max_tool_calls is None and config.max_tool_calls_per_turn is None
    assert config.headless is True
    assert config.loop_detection == LoopDetection(3, 10, 50)
    assert config.convergence == Convergence(0.95, 3, "warn")
    assert config.tool_breaker == ToolBreaker(3, 30.0, 30.0)
    assert config.reflector == NoopReflector()
    assert config.recovery == ExponentialBackoffRecovery(max_retries=3)
    assert config.budget == Budget()
    assert config.context_window == 200_000 and config.compact_threshold == 0.8
    assert config.auto_compact is True
    assert config.compactor == TruncatingCompactor()
    assert config.token_counter == HeuristicTokenCounter()
    assert config.model_settings == ModelSettings()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_turns", 0),
        ("max_turns", -1),
        ("max_turns", 1.5),
        ("max_concurrency", 0),
        ("tool_timeout", -1),
        ("tool_timeout", float("nan")),
        ("max_tool_calls", 0),
        ("max_tool_calls_per_turn", -2),
        ("max_tool_output_chars", -1),
        ("context_window", -1),
        ("compact_threshold", 0.0),
        ("compact_threshold", 1.5),
        ("stream", "yes"),
        ("loop_detection", "strict"),
        ("reflector", object()),
        ("compactor", 3),
    ],
)
def test_invalid_values_name_the_field(field: str, value: Any) -> None:
    with pytest.raises(ConfigurationError) as info:
        RunConfig(**{field: value})
    assert info.value.field == field
    assert f"RunConfig.{field}" in str(info.value)


def test_zero_disables_rather_than_fails() -> None:
    config = RunConfig(tool_timeout=0, context_window=0, max_tool_output_chars=0)
    assert config.tool_timeout == 0


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: LoopDetection(stop_threshold=-1), "stop_threshold"),
        (lambda: Convergence(threshold=1.5), "threshold"),
        (lambda: Convergence(count=1), "count"),
        (lambda: ToolBreaker(recovery_seconds=-1), "recovery_seconds"),
        (lambda: Budget(soft_fraction=0), "soft_fraction"),
        (lambda: ModelSettings(temperature=3), "temperature"),
        (lambda: ModelSettings(max_tokens=0), "max_tokens"),
        (lambda: ExponentialBackoffRecovery(max_retries=-1), "max_retries"),
        (lambda: TruncatingCompactor(preserve_recent=0), "preserve_recent"),
    ],
)
def test_component_values_are_validated(build: Any, field: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        build()
    assert info.value.field == field


def test_model_settings_stop_becomes_a_tuple() -> None:
    assert ModelSettings(stop="END").stop == ("END",)  # type: ignore[arg-type]
    assert ModelSettings(stop=["a", "b"]).stop == ("a", "b")  # type: ignore[arg-type]
