"""OpenTelemetry for pausing (SPEC 17, 10): the pause, the decisions, never a person's words."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentloop import Agent, Answer, Approve, Deny, Edit, Message, ModelResponse, tool
from agentloop.messages import ToolCallPart
from agentloop.otel import OtelObserver
from agentloop.pausing import Decision
from agentloop.store import SQLiteStore
from agentloop.testing import ScriptedModel, call, reply

pytestmark = pytest.mark.usefixtures("no_real_sleep")

SECRET_ARG = "order-swordfish-7781"
EDITED_ARG = "order-marlin-4242"
ANSWER_TEXT = "the customer says tuesday-5519"
DENY_TEXT = "not this one, heron-3030"


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@tool(external=True)
def ask_customer(question: str) -> str:
    """Ask the customer in the app."""
    raise AssertionError("an external tool is never run by the agent")


def traced(*, capture_content: bool = False) -> tuple[OtelObserver, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelObserver(provider.get_tracer("test"), capture_content=capture_content), exporter


def attrs(item: ReadableSpan | Event) -> Mapping[str, Any]:
    return dict(item.attributes or {})


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return sorted(
        (s for s in exporter.get_finished_spans() if s.name == name),
        key=lambda s: s.start_time or 0,
    )


def events(span: ReadableSpan, name: str) -> list[Event]:
    return [e for e in span.events if e.name == name]


def texts(spans: Sequence[ReadableSpan]) -> Iterator[str]:
    """Every string a span exports: name, attribute values, event attributes, status text."""
    for span in spans:
        yield span.name
        yield span.status.description or ""
        for attributes in [attrs(span), *(attrs(e) for e in span.events)]:
            yield from (repr(value) for value in attributes.values())


def two_calls() -> ModelResponse:
    """One reply calling an approval tool and an external one."""
    parts = (
        ToolCallPart("c1", "refund", {"order": SECRET_ARG}),
        ToolCallPart("c2", "ask_customer", {"question": "which day?"}),
    )
    return ModelResponse(Message("assistant", parts), stop_reason="tool_use")


async def test_a_paused_run_is_an_event_with_ids_tools_and_kinds_never_arguments() -> None:
    observer, exporter = traced()
    agent = Agent(
        ScriptedModel([two_calls(), reply("done")]),
        tools=[refund, ask_customer],
        observers=[observer],
    )
    run = await agent.run("refund it")
    assert run.paused

    (root,) = named(exporter, "invoke_agent agentloop")
    assert attrs(root)["agentloop.run.paused"] is True
    assert attrs(root)["agentloop.pending"] == 2
    assert root.status.status_code is StatusCode.UNSET  # waiting is not failing
    (paused,) = events(root, "agentloop.run.paused")
    assert attrs(paused) == {
        "agentloop.pending.call_ids": ("c1", "c2"),
        "agentloop.pending.tools": ("refund", "ask_customer"),
        "agentloop.pending.kinds": ("approval", "external"),
    }
    pending_spans = named(exporter, "execute_tool refund") + named(
        exporter, "execute_tool ask_customer"
    )
    for span in pending_spans:  # opened as the call was about to run, ended with the run
        assert attrs(span)["agentloop.tool.pending"] in ("approval", "external")
    assert not any(SECRET_ARG in text for text in texts(exporter.get_finished_spans()))


async def test_each_decision_is_an_event_on_the_continued_run_with_its_kind_only() -> None:
    observer, exporter = traced()
    first = ModelResponse(
        Message(
            "assistant",
            (
                ToolCallPart("c1", "refund", {"order": SECRET_ARG}),
                ToolCallPart("c2", "ask_customer", {"question": "which day?"}),
                ToolCallPart("c3", "refund", {"order": "B"}),
            ),
        ),
        stop_reason="tool_use",
    )
    agent = Agent(
        ScriptedModel([first, reply("done")]), tools=[refund, ask_customer], observers=[observer]
    )
    run = await agent.run("refund them")
    decisions: dict[str, Decision] = {
        "c1": Edit({"order": EDITED_ARG}),
        "c2": Answer(ANSWER_TEXT),
        "c3": Deny(DENY_TEXT),
    }
    finished = await agent.continue_run(decisions=decisions)
    assert finished.id == run.id and finished.output == "done"

    paused_span, continued = named(exporter, "invoke_agent agentloop")
    assert attrs(continued)["agentloop.run_id"] == attrs(paused_span)["agentloop.run_id"] == run.id
    assert attrs(continued)["agentloop.run.continued"] is True
    assert "agentloop.run.continued" not in attrs(paused_span)
    assert "agentloop.run.paused" not in attrs(continued)
    decided = [attrs(e) for e in events(continued, "agentloop.decision")]
    assert decided == [
        {
            "gen_ai.tool.call.id": "c1",
            "agentloop.decision.kind": "edit",
            "gen_ai.tool.name": "refund",
        },
        {
            "gen_ai.tool.call.id": "c2",
            "agentloop.decision.kind": "answer",
            "gen_ai.tool.name": "ask_customer",
        },
        {
            "gen_ai.tool.call.id": "c3",
            "agentloop.decision.kind": "deny",
            "gen_ai.tool.name": "refund",
        },
    ]
    spans = exporter.get_finished_spans()
    for secret in (SECRET_ARG, EDITED_ARG, ANSWER_TEXT, DENY_TEXT):
        assert not any(secret in text for text in texts(spans)), secret

    # the paused turn is reopened under the continued run; the edited call's span hangs from it
    turns = [s for s in named(exporter, "agentloop.turn") if s.parent is not None]
    reopened = [s for s in turns if attrs(s).get("agentloop.turn.continued")]
    assert len(reopened) == 1 and attrs(reopened[0])["agentloop.turn.index"] == 0
    assert reopened[0].parent is not None
    assert reopened[0].parent.span_id == continued.context.span_id
    ran = [
        s
        for s in named(exporter, "execute_tool refund")
        if "agentloop.tool.pending" not in attrs(s) and attrs(s)["gen_ai.tool.call.id"] == "c1"
    ]
    assert len(ran) == 1 and ran[0].parent is not None
    assert ran[0].parent.span_id == reopened[0].context.span_id
    assert continued.status.status_code is StatusCode.UNSET


async def test_decision_events_carry_no_content_even_with_content_capture() -> None:
    observer, exporter = traced(capture_content=True)
    steps = [call("ask_customer", {"question": "which day?"}, id="c9"), reply("done")]
    agent = Agent(ScriptedModel(steps), tools=[ask_customer], observers=[observer])
    await agent.run("ask")
    await agent.continue_run(decisions={"c9": Answer(ANSWER_TEXT)})
    _, continued = named(exporter, "invoke_agent agentloop")
    (decision,) = events(continued, "agentloop.decision")
    assert attrs(decision) == {
        "gen_ai.tool.call.id": "c9",
        "agentloop.decision.kind": "answer",
        "gen_ai.tool.name": "ask_customer",
    }


async def test_a_run_continued_by_another_agent_from_the_store_is_traced(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    steps = [call("refund", {"order": SECRET_ARG}, id="c1"), reply("done")]
    first, first_spans = traced()
    agent = Agent(ScriptedModel(steps), tools=[refund], store=store, observers=[first])
    run = await agent.run("refund it")
    (paused_span,) = named(first_spans, "invoke_agent agentloop")
    assert events(paused_span, "agentloop.run.paused")

    # another process: only the store is shared (its observer never saw the pause)
    second, second_spans = traced()
    resumed = Agent.resume(
        run.session_id or "",
        store=store,
        client=ScriptedModel([reply("done")]),
        tools=[refund],
        observers=[second],
    )
    await resumed.continue_run(decisions={"c1": Approve()})
    (continued,) = named(second_spans, "invoke_agent agentloop")
    assert attrs(continued)["agentloop.run_id"] == run.id
    (decision,) = events(continued, "agentloop.decision")
    assert attrs(decision) == {
        "gen_ai.tool.call.id": "c1",
        "agentloop.decision.kind": "approve",
        "gen_ai.tool.name": "refund",
    }
    store.close()


async def test_a_run_that_never_paused_has_no_pause_attributes() -> None:
    observer, exporter = traced()
    await Agent(ScriptedModel([reply("hi")]), observers=[observer]).run("hello")
    (root,) = named(exporter, "invoke_agent agentloop")
    assert not [k for k in attrs(root) if "paused" in k or "continued" in k or "pending" in k]
    assert not root.events


async def test_a_sub_agents_pause_is_on_both_run_spans_and_its_decision_too() -> None:
    observer, exporter = traced()
    child = Agent(
        ScriptedModel([call("refund", {"order": SECRET_ARG}, id="k1"), reply("child done")]),
        tools=[refund],
    )
    helper = child.as_tool(name="helper", description="Refunds things.")
    parent = Agent(
        ScriptedModel([call("helper", {"input": "go"}, id="p1"), reply("done")]),
        tools=[helper],
        observers=[observer],
    )
    run = await parent.run("x")
    assert [p.path for p in run.pending] == [("helper",)]
    await parent.continue_run(decisions={"k1": Approve()})

    for name in ("invoke_agent agentloop", "invoke_agent helper"):
        paused, continued = named(exporter, name)
        (pause,) = events(paused, "agentloop.run.paused")
        assert attrs(pause)["agentloop.pending.call_ids"] == ("k1",)
        (decision,) = events(continued, "agentloop.decision")
        assert attrs(decision)["gen_ai.tool.call.id"] == "k1"
        assert attrs(decision)["agentloop.decision.kind"] == "approve"
    (_, child_continued) = named(exporter, "invoke_agent helper")
    (decision,) = events(child_continued, "agentloop.decision")
    assert attrs(decision)["gen_ai.tool.name"] == "refund"  # the child's turn holds its call
    assert not any(SECRET_ARG in text for text in texts(exporter.get_finished_spans()))


async def test_a_cancelled_paused_run_is_a_run_span_of_its_own_marked_cancelled() -> None:
    observer, exporter = traced()
    agent = Agent(
        ScriptedModel([two_calls(), reply("done")]),
        tools=[refund, ask_customer],
        observers=[observer],
    )
    assert (await agent.run("refund it")).paused
    run = await agent.cancel_run()

    paused, cancelled = named(exporter, "invoke_agent agentloop")
    assert attrs(paused)["agentloop.run.paused"] is True
    assert attrs(cancelled)["agentloop.run_id"] == run.id == attrs(paused)["agentloop.run_id"]
    assert attrs(cancelled)["agentloop.run.cancelled"] is True
    assert attrs(cancelled)["agentloop.run.continued"] is True
    assert attrs(cancelled)["error.type"] == "Cancelled"
    assert cancelled.status.status_code is StatusCode.ERROR
    assert not any(SECRET_ARG in text for text in texts(exporter.get_finished_spans()))


async def test_a_cancelled_sub_agent_gets_one_span_however_often_its_end_arrives() -> None:
    observer, exporter = traced()
    child = Agent(
        ScriptedModel([call("refund", {"order": SECRET_ARG}, id="k1"), reply("child done")]),
        tools=[refund],
        observers=[observer],  # its events arrive directly and through its parent
    )
    helper = child.as_tool(name="helper", description="Refunds things.")
    parent = Agent(
        ScriptedModel([call("helper", {"input": "go"}, id="p1"), reply("done")]),
        tools=[helper],
        observers=[observer],
    )
    assert (await parent.run("x")).paused
    await parent.cancel_run()

    assert len(named(exporter, "invoke_agent agentloop")) == 2  # the pause, the cancel
    cancelled = [
        s
        for s in exporter.get_finished_spans()
        if attrs(s).get("agentloop.run.cancelled") and s.name.startswith("invoke_agent")
    ]
    assert len({attrs(s)["agentloop.run_id"] for s in cancelled}) == len(cancelled) == 2
    assert sorted(s.name for s in cancelled) == ["invoke_agent agentloop", "invoke_agent helper"]
    assert all(attrs(s)["error.type"] == "Cancelled" for s in cancelled)


async def test_a_finished_run_delivered_twice_opens_no_second_span() -> None:
    observer, exporter = traced()
    child = Agent(ScriptedModel([reply("child done")]), observers=[observer])
    helper = child.as_tool(name="helper", description="Helps.")
    parent = Agent(
        ScriptedModel([call("helper", {"input": "go"}, id="p1"), reply("done")]),
        tools=[helper],
        observers=[observer],
    )
    await parent.run("x")
    assert len(named(exporter, "invoke_agent agentloop")) == 1
    assert len([s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]) == 2
