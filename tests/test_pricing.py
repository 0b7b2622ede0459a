"""Prices from the genai-prices table: per-request estimates, Run.cost, the fail-closed budget."""

from __future__ import annotations

import pytest

from agentloop import Agent, Message, ModelResponse, RunConfig, ToolCallPart, Usage
from agentloop.errors import BudgetExhausted, ConfigurationError
from agentloop.pricing import Price, estimate_cost, sum_costs, table_available, table_cost
from agentloop.safety import Budget
from agentloop.testing import ScriptedModel, call, reply


def test_the_table_ships_with_the_package_and_prices_cached_input_lower() -> None:
    assert table_available()
    full = table_cost(Usage(1_000_000, 0), "claude-sonnet-4-5", "anthropic")
    read = table_cost(Usage(1_000_000, 0, cache_read_tokens=1_000_000), "claude-sonnet-4-5")
    write = table_cost(Usage(1_000_000, 0, cache_write_tokens=1_000_000), "claude-sonnet-4-5")
    assert full is not None and read is not None and write is not None
    assert read < full < write  # a tenth to read, a premium to write
    dated = table_cost(Usage(1000, 10), "claude-sonnet-4-5-20250929")
    assert dated == table_cost(Usage(1000, 10), "claude-sonnet-4-5")


@pytest.mark.parametrize("model", ["scripted", "no-such-model-9", ""])
def test_an_unknown_model_is_unknown_not_free(model: str) -> None:
    assert estimate_cost(Usage(10, 10), model) is None
    assert sum_costs([1.0, None, 2.0]) is None and sum_costs([1.0, 2.0]) == 3.0


def test_a_given_price_wins_over_the_table() -> None:
    mine = {"gpt-4o": Price(0.0, 0.0)}
    assert estimate_cost(Usage(10**6, 10**6), "gpt-4o", prices=mine) == 0.0
    assert (estimate_cost(Usage(10**6, 0), "gpt-4o") or 0) > 0


def test_price_validates_its_rates() -> None:
    with pytest.raises(ConfigurationError) as info:
        Price(1.0, 1.0, cache_read_per_million=float("nan"))
    assert info.value.field == "cache_read_per_million"


def test_run_cost_sums_turns_and_is_unknown_for_unpriced_models() -> None:
    model = ScriptedModel(
        [call("nothing"), reply("done", usage=Usage(4000, 50, cache_read_tokens=3500))],
        model="claude-sonnet-4-5",
    )
    run = Agent(model).run_sync("hi")
    expected = sum(table_cost(t.usage, t.model) or 0 for t in run.turns)
    assert run.cost == pytest.approx(expected) and run.cost is not None and run.cost > 0
    assert Agent(ScriptedModel([reply("x", usage=Usage(1, 1))])).run_sync("hi").cost is None
    run.usage = run.usage + Usage(5, 5)  # tokens no turn accounts for (a sub-agent's)
    assert run.cost is None


def test_a_cost_budget_refuses_the_request_after_an_unpriced_reply() -> None:
    model = ScriptedModel([call("nothing"), reply("never")], model="house-model")
    agent = Agent(model, config=RunConfig(budget=Budget(cost_usd=5.0)))
    with pytest.raises(ConfigurationError) as info:
        agent.run_sync("hi")
    assert "'house-model'" in str(info.value) and len(model.requests) == 1
    with pytest.raises(ConfigurationError):  # the next run is refused before sending
        agent.run_sync("again")
    assert len(model.requests) == 1


def test_a_cost_budget_counts_table_prices() -> None:
    spend = ModelResponse(
        Message.assistant("", [ToolCallPart("c1", "nothing", {})]), usage=Usage(1_000_000, 0)
    )
    model = ScriptedModel([spend, reply("never")], model="gpt-4o")
    agent = Agent(model, config=RunConfig(budget=Budget(cost_usd=0.5)))  # 1M tokens > $0.5
    with pytest.raises(BudgetExhausted) as info:
        agent.run_sync("hi")
    assert info.value.dimension == "cost_usd" and len(model.requests) == 1


def test_usage_summary_line() -> None:
    pytest.importorskip("rich")
    from agentloop.cli.console import usage_summary

    line = usage_summary(Usage(1200, 40, cache_read_tokens=1000, cache_write_tokens=150), 0.0021)
    assert line == "1200 in (1000 cache read, 150 cache write), 40 out, cost ~$0.0021"
    assert usage_summary(Usage(3, 1), None) == "3 in, 1 out, cost unknown"


def test_otel_spans_carry_cached_tokens() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentloop.otel import OtelObserver

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    usage = Usage(100, 5, cache_read_tokens=80, cache_write_tokens=15)
    model = ScriptedModel([reply("done", usage=usage)])
    Agent(model, observers=[OtelObserver(provider.get_tracer("t"))]).run_sync("hi")
    spans = {
        (s.attributes or {}).get("gen_ai.operation.name"): s for s in exporter.get_finished_spans()
    }
    for span in (spans["chat"], spans["invoke_agent"]):
        assert span.attributes is not None
        assert span.attributes["gen_ai.usage.input_tokens"] == 100
        assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 80
        assert span.attributes["gen_ai.usage.cache_creation.input_tokens"] == 15
