"""OpenTelemetry spans: run → turn → model call / tool call, errors recorded."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from agentloop import Agent, ToolError, tool
from agentloop.errors import ProviderUnavailable
from agentloop.otel import OtelObserver
from agentloop.testing import ScriptedModel, call, reply


@tool
def lookup(key: str) -> str:
    """Look up."""
    if key == "bad":
        raise ToolError("no such key")
    return "value"


def traced() -> tuple[OtelObserver, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelObserver(provider.get_tracer("test")), exporter


async def test_spans_nest_run_turn_model_and_tool() -> None:
    observer, exporter = traced()
    model = ScriptedModel(
        [[call("lookup", {"key": "a"}), call("lookup", {"key": "bad"})], reply("ok")]
    )
    await Agent(model, tools=[lookup], observers=[observer]).run("go")
    spans = {
        (s.name, s.attributes.get("agentloop.call_id")): s for s in exporter.get_finished_spans()
    }
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("agentloop.run") == 1 and names.count("agentloop.turn") == 2
    assert names.count("agentloop.model_call") == 2 and names.count("agentloop.tool_call") == 2
    run = spans[("agentloop.run", None)]
    tools = [s for s in exporter.get_finished_spans() if s.name == "agentloop.tool_call"]
    turn = next(s for s in exporter.get_finished_spans() if s.name == "agentloop.turn")
    assert all(t.parent is not None and t.parent.span_id == turn.context.span_id for t in tools)
    assert turn.parent is not None and turn.parent.span_id == run.context.span_id
    assert [t.attributes["agentloop.is_error"] for t in tools] == [False, True]
    assert run.status.status_code is StatusCode.UNSET


async def test_a_failed_run_closes_open_spans_with_the_error() -> None:
    observer, exporter = traced()
    model = ScriptedModel([ProviderUnavailable("down")])
    with pytest.raises(ProviderUnavailable):
        await Agent(model, observers=[observer]).run("go")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["agentloop.run"].status.status_code is StatusCode.ERROR
    assert spans["agentloop.run"].attributes["agentloop.stop_reason"] == "ProviderUnavailable"
    assert spans["agentloop.model_call"].status.status_code is StatusCode.ERROR
    assert set(spans) == {"agentloop.run", "agentloop.turn", "agentloop.model_call"}
