"""A second handoff after a filtered one (SPEC 26): what the next receiver sees.

The rule: every agent sees what the agent that handed over to it saw (its view), then the turns
since. A filtered handoff's result replaces the conversation for every agent after it in the
run, as in the OpenAI Agents SDK: a later ``input_filter`` shapes that view (never the full
transcript behind it), and a later handoff without a filter passes the view on whole. What a
filter hid stays hidden for the rest of the run; the committed history keeps everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentloop import Agent, handoff, tool
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentloop.model import ModelResponse
from agentloop.testing import ScriptedModel, call, reply

SECRET = "my card is 4111 1111 1111 1111"


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return "paid"


def last_question(messages: Sequence[Message]) -> list[Message]:
    """A filter: the customer's last message only."""
    return [m for m in messages if m.role == "user"][-1:]


def said(messages: Sequence[Message]) -> list[str]:
    """Each message as ``role: text``: a call by its name, a result by its content."""
    results = [",".join(p.content for p in m.parts if type(p) is ToolResultPart) for m in messages]
    return [
        f"{m.role}: {m.text or ','.join(c.name for c in m.tool_calls) or result}"
        for m, result in zip(messages, results, strict=True)
    ]


def chain(c_model: ScriptedModel, c_filter: Any, **c_options: Any) -> tuple[Agent[Any], Any]:
    """triage -(filtered)-> billing (a lookup, then) -(``c_filter``)-> refunds."""
    refunds = Agent(c_model, name="refunds", instructions="You refund.", **c_options)
    billing = Agent(
        ScriptedModel([call("lookup", {"order": "A1"}), call("transfer_to_refunds", {})]),
        name="billing",
        tools=[lookup],
        handoffs=[handoff(refunds, input_filter=c_filter)],
    )
    triage = Agent(
        ScriptedModel([reply("Noted."), call("transfer_to_billing", {})]),
        handoffs=[handoff(billing, input_filter=last_question)],
    )
    return triage, refunds


async def test_a_second_filter_shapes_the_view_the_first_one_made() -> None:
    received: list[list[Message]] = []

    def keep_all(messages: Sequence[Message]) -> list[Message]:
        received.append(list(messages))
        return list(messages)

    c_model = ScriptedModel([reply("Refunded.")])
    triage, _ = chain(c_model, keep_all)
    await triage.run(SECRET)
    run = await triage.run("refund A1")
    assert run.output == "Refunded." and run.last_agent == "refunds"
    view = ["user: refund A1", "assistant: lookup", "tool: paid"]  # billing's view, its turn
    assert said(received[0]) == view
    assert said(c_model.requests[0].messages) == view
    assert not any(SECRET in m.text for r in c_model.requests for m in r.messages)
    assert SECRET in said(triage.history)[0]  # the committed history keeps everything


async def test_a_second_handoff_without_a_filter_passes_the_view_on() -> None:
    c_model = ScriptedModel([reply("Refunded.")])
    triage, _ = chain(c_model, None)
    await triage.run(SECRET)
    await triage.run("refund A1")
    assert said(c_model.requests[0].messages) == [
        "user: refund A1",
        "assistant: lookup",
        "tool: paid",
        "assistant: transfer_to_refunds",
        "tool: Transferred to 'refunds'.",
    ]


def thought(step: str | ToolCallPart) -> ModelResponse:
    """A reply that opens with a thinking block (an append-only model's), then ``step``."""
    part = TextPart(step) if isinstance(step, str) else step
    return ModelResponse(Message("assistant", (ThinkingPart("hm", signature="sig"), part)))


def append_only(steps: list[Any]) -> ScriptedModel:
    model = ScriptedModel(steps)
    model.append_only = True  # type: ignore[attr-defined]
    return model


async def test_on_an_append_only_conversation_no_receivers_thinking_stays_in_the_history() -> None:
    refunds = Agent(append_only([thought("Refunded.")]), name="refunds")
    billing = Agent(
        append_only(
            [
                thought(ToolCallPart("l1", "lookup", {"order": "A1"})),
                thought(ToolCallPart("t2", "transfer_to_refunds", {})),
            ]
        ),
        name="billing",
        tools=[lookup],
        handoffs=[handoff(refunds, input_filter=last_question)],
    )
    triage = Agent(
        append_only([thought(ToolCallPart("t1", "transfer_to_billing", {})), thought("Hi.")]),
        handoffs=[handoff(billing, input_filter=last_question)],
    )
    run = await triage.run("refund A1")
    assert run.output == "Refunded."
    history = triage.history
    # the triage turn's thinking is the session's own; billing's and refunds' belong to the
    # conversations their filters opened, so the history keeps their text and calls only
    thinking = [i for i, m in enumerate(history) if any(type(p) is ThinkingPart for p in m.parts)]
    assert thinking == [2]
    assert said(history)[-1] == "assistant: Refunded."
    await triage.run("thanks")  # the session goes on in its own conversation
