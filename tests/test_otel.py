"""OpenTelemetry spans by the GenAI conventions: names, nesting, attributes, errors, privacy."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agentloop import Agent, Message, ModelResponse, Observer, ToolContext, ToolError, Usage, tool
from agentloop.errors import AuthError, Cancelled, FailurePhase, ProviderUnavailable
from agentloop.observers import EVENTS
from agentloop.otel import OtelObserver
from agentloop.providers.fallback import FallbackClient
from agentloop.providers.retrying import RetryingClient
from agentloop.testing import ScriptedModel, call, reply

SECRET = "sk-proj-Zq8xK2mV9pL4tR7wY1nB5cD3"
TOOL_TEXT = "the vault opens with swordfish-7781"
PROMPT = "open the vault please"
FINAL = "the vault is open"


@tool
def lookup(key: str) -> str:
    """Look up a key."""
    if key == "bad":
        raise ToolError("no such key: bad")
    return TOOL_TEXT


@tool
async def hang(ctx: ToolContext) -> str:
    """Cancel the run, then wait to be cancelled."""
    ctx.cancel.cancel()
    await asyncio.Event().wait()
    return "never"


def traced(*, capture_content: bool = False) -> tuple[OtelObserver, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = OtelObserver(provider.get_tracer("test"), capture_content=capture_content)
    return observer, exporter


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = named(exporter, name)
    return span


def parent_of(span: ReadableSpan, exporter: InMemorySpanExporter) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next(
        s for s in exporter.get_finished_spans() if s.context.span_id == span.parent.span_id
    )


def attrs(item: ReadableSpan | Event) -> Mapping[str, Any]:
    """A span's or span event's attributes (never None)."""
    return dict(item.attributes or {})


def texts(spans: Sequence[ReadableSpan]) -> Iterator[str]:
    """Every string a span exports: name, attribute values, event attributes, status text."""
    for span in spans:
        yield span.name
        yield span.status.description or ""
        for attributes in [attrs(span), *(attrs(e) for e in span.events)]:
            for value in attributes.values():
                yield repr(value)


async def test_spans_are_named_and_nested_by_the_genai_conventions() -> None:
    observer, exporter = traced()
    served = ModelResponse(
        Message.assistant(FINAL), usage=Usage(7, 3), model="gpt-4o-2024-08-06", stop_reason="stop"
    )
    model = ScriptedModel([[call("lookup", {"key": "a"}, id="c1")], served], model="gpt-4o")
    await Agent(model, tools=[lookup], observers=[observer]).run(PROMPT)

    names = sorted(s.name for s in exporter.get_finished_spans())
    expected = ["invoke_agent agentloop", "execute_tool lookup"]
    assert names == sorted([*expected, *["agentloop.turn", "chat gpt-4o"] * 2])
    run = one(exporter, "invoke_agent agentloop")
    turns = sorted(
        named(exporter, "agentloop.turn"), key=lambda s: attrs(s)["agentloop.turn.index"]
    )
    chats = sorted(named(exporter, "chat gpt-4o"), key=lambda s: s.start_time or 0)
    tool_span = one(exporter, "execute_tool lookup")
    assert parent_of(run, exporter) is None
    assert [parent_of(t, exporter) for t in turns] == [run, run]
    assert [parent_of(c, exporter) for c in chats] == turns
    assert parent_of(tool_span, exporter) == turns[0]
    assert (run.kind, chats[0].kind, tool_span.kind) == (
        SpanKind.INTERNAL,
        SpanKind.CLIENT,
        SpanKind.INTERNAL,
    )

    assert attrs(run)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(run)["gen_ai.agent.name"] == "agentloop"
    assert attrs(run)["gen_ai.provider.name"] == "scripted"
    assert attrs(run)["gen_ai.usage.input_tokens"] == 7
    assert run.status.status_code is StatusCode.UNSET

    final = attrs(chats[1])
    assert final == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.provider.name": "scripted",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 3,
        "gen_ai.response.finish_reasons": ("stop",),
    }
    assert attrs(chats[0])["gen_ai.response.finish_reasons"] == ("tool_use",)

    assert attrs(tool_span)["gen_ai.operation.name"] == "execute_tool"
    assert attrs(tool_span)["gen_ai.tool.name"] == "lookup"
    assert attrs(tool_span)["gen_ai.tool.call.id"] == "c1"
    assert attrs(tool_span)["agentloop.tool.attempt"] == 0
    assert "error.type" not in attrs(tool_span)
    assert tool_span.status.status_code is StatusCode.UNSET


async def test_a_soft_tool_error_marks_its_span_and_not_the_run() -> None:
    observer, exporter = traced()
    model = ScriptedModel(
        [
            [call("lookup", {"key": "a"}, id="ok"), call("lookup", {"key": "bad"}, id="no")],
            reply("x"),
        ]
    )
    await Agent(model, tools=[lookup], observers=[observer]).run("go")
    tools = {attrs(s)["gen_ai.tool.call.id"]: s for s in named(exporter, "execute_tool lookup")}
    failed = tools["no"]
    assert attrs(failed)["error.type"] == "tool_error"
    assert attrs(failed)["agentloop.error.channel"] == "soft"
    assert failed.status.status_code is StatusCode.ERROR
    assert not any("no such key" in t for t in texts([failed]))
    assert tools["ok"].status.status_code is StatusCode.UNSET
    run = one(exporter, "invoke_agent agentloop")
    assert run.status.status_code is StatusCode.UNSET
    assert "error.type" not in attrs(run)


async def test_a_hard_provider_error_ends_open_spans_with_class_phase_and_channel() -> None:
    observer, exporter = traced()
    error = AuthError("bad key", provider="openai", phase=FailurePhase.STATUS, status_code=401)
    with pytest.raises(AuthError):
        await Agent(ScriptedModel([error]), observers=[observer]).run("go")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent agentloop", "agentloop.turn", "chat scripted"}
    for span in spans.values():
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "AuthError"
        assert attrs(span)["error.type"] == "AuthError"
        assert attrs(span)["agentloop.error.phase"] == "status"
        assert attrs(span)["agentloop.error.channel"] == "hard"
        assert attrs(span)["http.response.status_code"] == 401
    assert "gen_ai.response.model" not in attrs(spans["chat scripted"])


async def test_a_tool_span_left_open_by_a_cancel_ends_with_the_run_error() -> None:
    observer, exporter = traced()
    model = ScriptedModel([[call("hang", id="h1")]])
    with pytest.raises(Cancelled):
        await Agent(model, tools=[hang], observers=[observer]).run("go")
    span = one(exporter, "execute_tool hang")
    assert attrs(span)["error.type"] == "Cancelled"
    assert attrs(span)["agentloop.error.channel"] == "hard"
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(one(exporter, "invoke_agent agentloop"))["error.type"] == "Cancelled"


async def _no_sleep(seconds: float) -> None:
    return None


async def test_a_retry_is_an_event_on_the_model_call_span() -> None:
    observer, exporter = traced()
    down = ProviderUnavailable("down", provider="openai", phase="status", status_code=503)
    client = RetryingClient(ScriptedModel([down, reply("ok")]), sleep=_no_sleep)
    await Agent(client, observers=[observer]).run("go")
    chat = one(exporter, "chat scripted")
    (event,) = chat.events
    assert event.name == "agentloop.retry"
    assert attrs(event)["error.type"] == "ProviderUnavailable"
    assert attrs(event)["agentloop.error.phase"] == "status"
    assert attrs(event)["http.response.status_code"] == 503
    assert attrs(event)["agentloop.retry.attempt"] == 1
    assert chat.status.status_code is StatusCode.UNSET


async def test_a_fallback_is_an_event_on_the_model_call_span() -> None:
    observer, exporter = traced()
    down = ProviderUnavailable("down", provider="openai", phase="status", status_code=503)
    client = FallbackClient(
        [ScriptedModel([down], model="primary"), ScriptedModel([reply("ok")], model="backup")]
    )
    await Agent(client, observers=[observer]).run("go")
    chat = one(exporter, "chat primary")
    assert attrs(chat)["gen_ai.response.model"] == "backup"
    events = [e for e in chat.events if e.name == "agentloop.fallback"]
    assert len(events) == 1
    assert attrs(events[0])["agentloop.from_model"] == "primary"
    assert attrs(events[0])["agentloop.to_model"] == "backup"
    assert attrs(events[0])["error.type"] == "ProviderUnavailable"


async def test_a_loop_warning_is_an_event_without_its_pattern() -> None:
    observer, exporter = traced()
    same = [call("lookup", {"key": SECRET})]
    model = ScriptedModel([same, same, same, reply("x")])
    await Agent(model, tools=[lookup], observers=[observer]).run("go")
    warnings = [
        (s, e)
        for s in named(exporter, "agentloop.turn")
        for e in s.events
        if e.name == "agentloop.loop_warning"
    ]
    assert len(warnings) == 1
    span, event = warnings[0]
    assert attrs(span)["agentloop.turn.index"] == 2
    assert attrs(event) == {"agentloop.loop.repetitions": 3}


async def test_no_content_reaches_a_span_by_default() -> None:
    observer, exporter = traced()
    model = ScriptedModel([[call("lookup", {"key": SECRET})]] * 3 + [reply(FINAL)])
    await Agent(model, tools=[lookup], observers=[observer]).run(PROMPT)
    spans = exporter.get_finished_spans()
    assert len(named(exporter, "execute_tool lookup")) == 3
    exported = "\n".join(texts(spans))
    for content in (SECRET, TOOL_TEXT, PROMPT, FINAL, "key"):
        assert content not in exported
    assert not any(k.startswith(("gen_ai.input", "gen_ai.output")) for s in spans for k in attrs(s))


async def test_content_is_recorded_redacted_when_opted_in() -> None:
    observer, exporter = traced(capture_content=True)
    model = ScriptedModel([[call("lookup", {"key": SECRET}, id="c1")], reply(FINAL)])
    await Agent(model, tools=[lookup], observers=[observer]).run(PROMPT)
    exported = "\n".join(texts(exporter.get_finished_spans()))
    assert SECRET not in exported

    run = one(exporter, "invoke_agent agentloop")
    assert json.loads(str(attrs(run)["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": PROMPT}]}
    ]
    assert FINAL in str(attrs(run)["gen_ai.output.messages"])

    tool_span = one(exporter, "execute_tool lookup")
    arguments = json.loads(str(attrs(tool_span)["gen_ai.tool.call.arguments"]))
    assert arguments == {"key": "[REDACTED]"}
    assert attrs(tool_span)["gen_ai.tool.call.result"] == TOOL_TEXT

    first = next(
        s
        for s in named(exporter, "chat scripted")
        if attrs(s)["gen_ai.response.finish_reasons"] == ("tool_use",)
    )
    (output,) = json.loads(str(attrs(first)["gen_ai.output.messages"]))
    assert output["role"] == "assistant" and output["finish_reason"] == "tool_use"
    assert output["parts"] == [
        {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"key": "[REDACTED]"}}
    ]


async def test_a_sub_agent_nests_under_its_tool_span_once() -> None:
    observer, exporter = traced()
    child = Agent(ScriptedModel([reply("child done")] * 2), observers=[observer])
    helper = child.as_tool(name="helper", description="Helps.")
    parent_model = ScriptedModel([[call("helper", {"input": "help"}, id="p1")], reply("ok")])
    await Agent(parent_model, tools=[helper], observers=[observer]).run("go")

    # The observer sits on both agents: the child's run is still traced exactly once.
    child_run = one(exporter, "invoke_agent helper")
    assert attrs(child_run)["gen_ai.agent.name"] == "helper"
    tool_span = one(exporter, "execute_tool helper")
    assert parent_of(child_run, exporter) == tool_span
    assert attrs(child_run)["agentloop.agent.path"] == ("helper",)
    child_turn = next(
        s for s in named(exporter, "agentloop.turn") if parent_of(s, exporter) == child_run
    )
    assert len(named(exporter, "chat scripted")) == 3
    assert any(parent_of(c, exporter) == child_turn for c in named(exporter, "chat scripted"))


def test_spans_come_from_on_event_only() -> None:
    overridden = [
        name for name in EVENTS if getattr(OtelObserver, name) is not getattr(Observer, name)
    ]
    assert overridden == []
    assert OtelObserver.on_event is not Observer.on_event


async def test_reasoning_tokens_are_recorded_and_reasoning_text_is_not() -> None:
    from agentloop.messages import TextPart, ThinkingPart

    observer, exporter = traced()
    message = Message("assistant", (ThinkingPart("secret plan", signature="s"), TextPart("ok")))
    model = ScriptedModel([ModelResponse(message, usage=Usage(4, 9, reasoning_tokens=6))])
    await Agent(model, observers=[observer]).run("go")
    [chat] = named(exporter, "chat scripted")
    assert attrs(chat)["gen_ai.usage.reasoning.output_tokens"] == 6
    every = [str(v) for s in exporter.get_finished_spans() for v in attrs(s).values()]
    assert not any("secret plan" in v for v in every)  # content capture is off
