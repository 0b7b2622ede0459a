"""Budget gate: hard lines refuse the next request, one warning per dimension per run."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentloop.errors import BudgetExhausted, ConfigurationError
from agentloop.messages import Usage
from agentloop.safety.budget import DIMENSIONS, Budget, BudgetGate, BudgetWarning, Price, soft_line


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def gate(**kwargs: Any) -> tuple[BudgetGate, FakeClock]:
    clock = FakeClock()
    return BudgetGate(Budget(**kwargs), clock=clock), clock


def test_defaults_disable_every_line() -> None:
    budget_gate, clock = gate()
    budget_gate.record_usage(Usage(10**9, 10**9), "m")
    budget_gate.record_turn()
    budget_gate.record_tool_calls(10**6)
    clock.now += 10**6
    assert budget_gate.pre_request() == ([], None)
    assert Budget().soft_fraction == 0.8


def test_the_request_that_crosses_the_line_completes_and_the_next_is_refused() -> None:
    budget_gate, _ = gate(turns=2)
    assert budget_gate.pre_request() == ([], None)
    budget_gate.record_turn()
    warnings, exhausted = budget_gate.pre_request()
    assert warnings == [BudgetWarning("turns", 1, 2)] and exhausted is None
    budget_gate.record_turn()
    warnings, exhausted = budget_gate.pre_request()
    assert warnings == []
    assert isinstance(exhausted, BudgetExhausted)
    assert (exhausted.dimension, exhausted.spent, exhausted.limit) == ("turns", 2, 2)
    assert not exhausted.is_recoverable()


def test_one_below_the_hard_line_is_allowed() -> None:
    budget_gate, _ = gate(tokens=100)
    budget_gate.record_usage(Usage(60, 39), "m")
    assert budget_gate.pre_request()[1] is None
    budget_gate.record_usage(Usage(0, 1), "m")
    exhausted = budget_gate.pre_request()[1]
    assert isinstance(exhausted, BudgetExhausted) and exhausted.spent == 100


def test_soft_line_warns_exactly_once_per_run_at_and_not_below_the_line() -> None:
    budget_gate, _ = gate(tokens=200)
    budget_gate.record_usage(Usage(159, 0), "m")
    assert budget_gate.pre_request() == ([], None)
    budget_gate.record_usage(Usage(1, 0), "m")
    assert budget_gate.pre_request() == ([BudgetWarning("tokens", 160, 200)], None)
    budget_gate.record_usage(Usage(10, 0), "m")
    assert budget_gate.pre_request() == ([], None)


def test_a_hard_crossing_without_a_prior_warning_also_warns() -> None:
    budget_gate, _ = gate(tool_calls=5)
    budget_gate.record_tool_calls(7)
    warnings, exhausted = budget_gate.pre_request()
    assert warnings == [BudgetWarning("tool_calls", 7, 5)]
    assert isinstance(exhausted, BudgetExhausted) and exhausted.dimension == "tool_calls"
    warnings, again = budget_gate.pre_request()
    assert warnings == [] and again is not None


def test_begin_resets_counters_and_warnings() -> None:
    budget_gate, clock = gate(turns=2, wall_clock=10.0)
    budget_gate.record_turn()
    clock.now += 9
    assert len(budget_gate.pre_request()[0]) == 2
    budget_gate.begin()
    assert budget_gate.spent("turns") == 0 and budget_gate.spent("wall_clock") == 0
    budget_gate.record_turn()
    assert budget_gate.pre_request()[0] == [BudgetWarning("turns", 1, 2)]


def test_wall_clock_in_seconds_both_sides_of_the_line() -> None:
    budget_gate, clock = gate(wall_clock=60.0)
    clock.now += 59.999
    assert budget_gate.pre_request()[1] is None
    clock.now += 0.001
    exhausted = budget_gate.pre_request()[1]
    assert isinstance(exhausted, BudgetExhausted) and exhausted.dimension == "wall_clock"
    assert exhausted.spent == pytest.approx(60.0) and exhausted.limit == 60.0


def test_output_tokens_count_only_output() -> None:
    budget_gate, _ = gate(output_tokens=10)
    budget_gate.record_usage(Usage(1000, 9), "m")
    assert budget_gate.pre_request()[1] is None
    budget_gate.record_usage(Usage(0, 1), "m")
    exhausted = budget_gate.pre_request()[1]
    assert isinstance(exhausted, BudgetExhausted) and exhausted.dimension == "output_tokens"


def test_dimensions_are_checked_in_order() -> None:
    budget_gate, clock = gate(tokens=1, output_tokens=1, turns=1, wall_clock=1.0, tool_calls=1)
    budget_gate.record_usage(Usage(1, 1), "m")
    budget_gate.record_turn()
    budget_gate.record_tool_calls(1)
    clock.now += 1
    warnings, exhausted = budget_gate.pre_request()
    assert [w.dimension for w in warnings] == list(DIMENSIONS[:5])
    assert isinstance(exhausted, BudgetExhausted) and exhausted.dimension == "tokens"


def test_zero_disables_a_line() -> None:
    budget_gate, _ = gate(tokens=0, turns=0)
    budget_gate.record_usage(Usage(5, 5), "m")
    budget_gate.record_turn()
    assert budget_gate.pre_request() == ([], None)


def test_cost_in_dollars_from_the_price_table() -> None:
    prices = {"big": Price(input_per_million=3.0, output_per_million=15.0)}
    budget_gate, _ = gate(cost_usd=1.0, prices=prices)
    budget_gate.record_usage(Usage(100_000, 20_000), "big")  # 0.30 + 0.30
    assert budget_gate.spent("cost_usd") == pytest.approx(0.6)
    assert budget_gate.pre_request() == ([], None)
    budget_gate.record_usage(Usage(100_000, 0), "big")  # 0.90: past the 0.8 soft line
    warnings, exhausted = budget_gate.pre_request()
    assert [w.dimension for w in warnings] == ["cost_usd"] and exhausted is None
    budget_gate.record_usage(Usage(0, 10_000), "big")  # 1.05
    exhausted = budget_gate.pre_request()[1]
    assert isinstance(exhausted, BudgetExhausted) and exhausted.dimension == "cost_usd"


def test_an_unpriced_model_fails_closed_naming_the_model() -> None:
    budget_gate, _ = gate(cost_usd=1.0, prices={"big": Price(1.0, 1.0)})
    budget_gate.record_usage(Usage(10, 10), "unknown-model")
    assert budget_gate.spent("cost_usd") == 0.0
    refused = budget_gate.pre_request()[1]
    assert isinstance(refused, ConfigurationError) and refused.field == "prices"
    assert "'unknown-model'" in str(refused) and "free" in str(refused)
    budget_gate.begin()  # a later run of the same gate is refused too, before any request
    assert isinstance(budget_gate.pre_request()[1], ConfigurationError)
    restored = gate(cost_usd=1.0, prices={"big": Price(1.0, 1.0)})[0]
    restored.restore(budget_gate.snapshot())  # and in a continued run
    assert isinstance(restored.pre_request()[1], ConfigurationError)


def test_an_unpriced_model_is_harmless_without_a_cost_line() -> None:
    budget_gate, _ = gate(tokens=10**6)
    budget_gate.record_usage(Usage(10, 10), "unknown-model")
    assert budget_gate.pre_request() == ([], None)


def test_cost_from_the_genai_prices_table_with_cached_input() -> None:
    budget_gate, _ = gate(cost_usd=100.0)  # no prices: the table prices it
    budget_gate.record_usage(Usage(1_000_000, 0), "gpt-4o")
    uncached = budget_gate.spent("cost_usd")
    budget_gate.begin()
    budget_gate.record_usage(Usage(1_000_000, 0, cache_read_tokens=900_000), "gpt-4o")
    assert 0 < budget_gate.spent("cost_usd") < uncached  # cached input is cheaper, not free


def test_cached_rates_of_a_hand_written_price() -> None:
    price = Price(3.0, 15.0, cache_read_per_million=0.3, cache_write_per_million=3.75)
    usage = Usage(1_000_000, 0, cache_read_tokens=600_000, cache_write_tokens=100_000)
    assert price.cost(usage) == pytest.approx(0.9 + 0.18 + 0.375)
    assert Price(3.0, 15.0).cost(usage) == pytest.approx(3.0)  # no cached rate: no discount


def test_cost_without_prices_needs_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentloop.safety import budget as budget_module

    monkeypatch.setattr(budget_module, "table_available", lambda: False)
    with pytest.raises(ConfigurationError) as info:
        Budget(cost_usd=5.0)
    assert info.value.field == "prices" and "agentloop[cost]" in str(info.value)
    with pytest.raises(ConfigurationError):
        Budget(cost_usd=5.0, prices={})
    with pytest.raises(ConfigurationError):
        Budget(prices={"m": (1.0, 2.0)})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError):
        Price(-1.0, 1.0)


def test_prices_are_copied_and_the_budget_stays_hashable() -> None:
    prices = {"m": Price(1.0, 1.0)}
    budget = Budget(cost_usd=1.0, prices=prices)
    prices["m"] = Price(100.0, 100.0)
    assert budget.prices is not None and budget.prices["m"] == Price(1.0, 1.0)
    assert hash(budget) == hash(Budget(cost_usd=1.0, prices={"m": Price(1.0, 1.0)}))
    assert pickle.loads(pickle.dumps(budget)) == budget


@pytest.mark.parametrize("fraction", [0.0, -0.5, 1.01])
def test_soft_fraction_outside_the_range_is_rejected(fraction: float) -> None:
    with pytest.raises(ConfigurationError):
        Budget(soft_fraction=fraction)


def test_soft_line_examples() -> None:
    assert soft_line(200, 0.8) == 160
    assert soft_line(1, 0.8) == 0
    assert soft_line(100, 0.29) == 29  # 100 * 0.29 is 28.999999999999996 in floats
    assert soft_line(100, 1.0) == 100
    assert soft_line(60.0, 0.5) == 30.0


def test_a_soft_line_of_zero_waits_for_some_spending() -> None:
    budget_gate, _ = gate(turns=1)
    assert budget_gate.pre_request() == ([], None)


def test_soft_fraction_one_makes_soft_and_hard_lines_coincide() -> None:
    budget_gate, _ = gate(turns=3, soft_fraction=1.0)
    budget_gate.record_turn()
    budget_gate.record_turn()
    assert budget_gate.pre_request() == ([], None)
    budget_gate.record_turn()
    warnings, exhausted = budget_gate.pre_request()
    assert len(warnings) == 1 and exhausted is not None


@given(
    limit=st.integers(0, 10**12),
    fraction=st.floats(min_value=1e-6, max_value=1.0, allow_nan=False),
)
def test_the_soft_line_never_exceeds_the_hard_one(limit: int, fraction: float) -> None:
    # Bug history: a soft line above the hard line never warned.
    line = soft_line(limit, fraction)
    assert isinstance(line, int) and 0 <= line <= limit


@given(
    limit=st.floats(min_value=0.0, max_value=1e9, allow_nan=False),
    fraction=st.floats(min_value=1e-6, max_value=1.0, allow_nan=False),
)
def test_the_soft_line_never_exceeds_the_hard_one_for_floats(limit: float, fraction: float) -> None:
    assert soft_line(limit, fraction) <= limit


def test_each_gate_keeps_its_own_spend_and_unpriced_models() -> None:
    """Gates start from shared empty values (issue 39): what one gate counts stays its own."""
    first, _ = gate(cost_usd=1.0, prices={"big": Price(1.0, 1.0)})
    second, _ = gate(cost_usd=1.0, prices={"big": Price(1.0, 1.0)})
    first.record_usage(Usage(10, 10), "unknown-model")
    first.record_turn()
    assert isinstance(first.pre_request()[1], ConfigurationError)
    assert second.pre_request() == ([], None)
    assert second.snapshot()["unpriced"] == [] and second.spent("tokens") == 0
    assert second.spent("turns") == 0 and BudgetGate(Budget()).spent("turns") == 0
