"""A filtered handoff's view (SPEC 26) under compaction (SPEC 7): measured, compacted, sent.

After a handoff with an ``input_filter`` the receiver's requests send the filter's messages,
then what the transcript adds. The context guard measures that view, a compaction pass (the
threshold's, or the emergency one after a provider's context-length rejection) compacts it,
and the requests after it send the compacted view and what follows, nothing dropped or sent
twice; the session's history keeps every message. A pause after such a pass continues in the
compacted view; on an append-only conversation (SPEC 28) the entries stay and the receiver's
thinking leaves the history at the run's end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentloop import Agent, Approve, Message, RunConfig, handoff, tool
from agentloop.errors import ContextLengthExceeded
from agentloop.handoffs import remove_tool_calls
from agentloop.messages import TextPart, ThinkingPart, ToolCallPart, ToolChangePart
from agentloop.model import ModelResponse, ToolSpec
from agentloop.run import RunContext
from agentloop.testing import ScriptedModel, call, reply
from agentloop.tokens import TokenCounter
from agentloop.toolsets import FunctionToolset


class CharCounter:
    """One token per character of text, result content and call name; no overhead."""

    def count_text(self, text: str) -> int:
        return len(text)

    def count_message(self, message: Message) -> int:
        return (
            len(message.text)
            + sum(len(r.content) for r in message.tool_results_parts)
            + sum(len(c.name) for c in message.tool_calls)
        )


class KeepsLastExchange:
    """A summary, then the last call and its results; records what it was given."""

    def __init__(self) -> None:
        self.given: list[list[str]] = []

    async def compact(
        self, messages: Sequence[Message], *, target_tokens: int, counter: TokenCounter
    ) -> list[Message]:
        self.given.append(said(messages))
        return [Message.user("summary"), *messages[-2:]]


def said(messages: Sequence[Message]) -> list[str]:
    """Each message as one short line: its role, then its calls, results or text."""
    lines = []
    for message in messages:
        if message.tool_calls:
            what = "call " + ",".join(c.name for c in message.tool_calls)
        elif message.tool_results_parts:
            what = "result " + ",".join(r.content[:6] for r in message.tool_results_parts)
        else:
            what = message.text
        lines.append(f"{message.role}: {what}")
    return lines


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return "paid"


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}" + "x" * 500


@tool(requires_approval=True)
def cancel_plan(plan: str) -> str:
    """Cancel a plan."""
    return f"cancelled {plan}"


def config(**kwargs: Any) -> RunConfig:
    values: dict[str, Any] = {
        "context_window": 1500,  # compacts past 1200: two pages and the tools' schemas
        "token_counter": CharCounter(),
        "compactor": KeepsLastExchange(),
    }
    values.update(kwargs)
    return RunConfig(**values)


def triage_with(billing: Agent[Any], run_config: RunConfig, **kwargs: Any) -> Agent[Any]:
    steps = [call("lookup", {"order": "A1"}), call("transfer_to_billing", {})]
    return Agent(
        ScriptedModel(steps),
        tools=[lookup],
        handoffs=[handoff(billing, input_filter=remove_tool_calls)],
        config=run_config,
        **kwargs,
    )


HANDED = [
    "user: cancel my plan",
    "assistant: call lookup",
    "tool: result paid",
    "assistant: call transfer_to_billing",
    "tool: result Transf",
]
"""The starting agent's part of the history."""


async def test_a_compaction_in_a_filtered_view_compacts_the_view_and_sends_it() -> None:
    steps = [
        call("fetch", {"page": 1}),
        call("fetch", {"page": 2}),
        call("lookup", {"order": "A1"}),
    ]
    billing_model = ScriptedModel([*steps, reply("Gone.")])
    billing = Agent(billing_model, name="billing", tools=[fetch, lookup])
    compactor = KeepsLastExchange()
    run_config = config(compactor=compactor)
    agent = triage_with(billing, run_config)
    run = await agent.run("cancel my plan")
    assert run.output == "Gone." and run.stop_reason is None
    sent = [said(r.messages) for r in billing_model.requests]
    view = ["user: cancel my plan", "assistant: call fetch", "tool: result page 1"]
    assert sent[:2] == [["user: cancel my plan"], view]
    exchange = ["assistant: call fetch", "tool: result page 2"]
    assert compactor.given == [[*view, *exchange]]  # the view, not the history
    compacted = ["user: summary", *exchange]
    assert sent[2] == compacted  # nothing dropped, nothing sent twice
    assert sent[3] == [*compacted, "assistant: call lookup", "tool: result paid"]
    billing_part = [*view[1:], *exchange, "assistant: call lookup", "tool: result paid"]
    assert said(agent.history) == [*HANDED, *billing_part, "assistant: Gone."]  # all of it
    assert said(run.messages) == said(agent.history)


async def test_the_emergency_compaction_after_a_rejection_compacts_the_view() -> None:
    rejected = ContextLengthExceeded("prompt is too long: 9000 tokens > 8000 maximum")
    steps = [call("fetch", {"page": 1}), call("fetch", {"page": 2}), rejected, reply("Gone.")]
    billing_model = ScriptedModel(steps)
    billing = Agent(billing_model, name="billing", tools=[fetch])
    compactor = KeepsLastExchange()
    run_config = config(context_window=100_000, compactor=compactor)
    agent = triage_with(billing, run_config)
    run = await agent.run("cancel my plan")
    assert run.output == "Gone."
    view = [
        "user: cancel my plan",
        "assistant: call fetch",
        "tool: result page 1",
        "assistant: call fetch",
        "tool: result page 2",
    ]
    assert compactor.given == [view]
    sent = [said(r.messages) for r in billing_model.requests]
    assert sent[2] == view  # the rejected request
    assert sent[3] == ["user: summary", *view[-2:]]  # the retry sends the compacted view
    assert len(agent.history) == len(HANDED) + 5


async def test_a_pause_after_a_compaction_continues_in_the_compacted_view() -> None:
    steps = [
        call("fetch", {"page": 1}),
        call("fetch", {"page": 2}),
        call("cancel_plan", {"plan": "pro"}, id="c1"),
        reply("Gone."),
    ]
    billing_model = ScriptedModel(steps)
    billing = Agent(billing_model, name="billing", tools=[fetch, cancel_plan])
    agent = triage_with(billing, config())
    paused = await agent.run("cancel my plan")
    assert paused.paused and paused.pending[0].id == "c1"
    done = await agent.continue_run(decisions={"c1": Approve()})
    assert done.output == "Gone."
    compacted = ["user: summary", "assistant: call fetch", "tool: result page 2"]
    *_, before, after = [said(r.messages) for r in billing_model.requests]
    assert before == compacted
    assert after == [*compacted, "assistant: call cancel_plan", "tool: result cancel"]
    billing_part = said(agent.history)[len(HANDED) :]
    assert said(agent.history)[: len(HANDED)] == HANDED
    assert billing_part[-3:] == [
        "assistant: call cancel_plan",
        "tool: result cancel",
        "assistant: Gone.",
    ]
    assert len(billing_part) == 7  # two fetches, the cancel and the answer: nothing lost


files = FunctionToolset(name="files")


@files.tool
def look(path: str) -> str:
    """Look at a file."""
    return f"contents of {path}" + "x" * 500


@files.tool
def erase(path: str) -> str:
    """Erase a file."""
    return f"erased {path}"


def late_erase(ctx: RunContext[Any], spec: ToolSpec) -> bool:
    return spec.name != "erase" or ctx.turn >= 3  # the receiver's tools change mid-run


def thought(step: str | ToolCallPart) -> ModelResponse:
    """A reply that opens with a thinking block (an append-only model's), then ``step``."""
    part = TextPart(step) if isinstance(step, str) else step
    return ModelResponse(Message("assistant", (ThinkingPart("hm", signature="sig"), part)))


def changes(messages: Sequence[Message]) -> list[list[str]]:
    """The tools each entry of ``messages`` adds."""
    return [
        [t.name for p in m.parts if isinstance(p, ToolChangePart) for t in p.added]
        for m in messages
        if m.role == "system"
    ]


def append_only(steps: list[Any]) -> ScriptedModel:
    model = ScriptedModel(steps)
    model.append_only = True  # type: ignore[attr-defined]
    return model


async def test_an_append_only_view_keeps_its_entries_through_a_compaction() -> None:
    first = thought(ToolCallPart("t1", "look", {"path": "a"}))  # thinking before the compaction
    steps = [first, call("look", {"path": "b"}), thought("Gone.")]
    billing_model = append_only(steps)
    billing = Agent(
        billing_model, name="billing", system="You bill.", toolsets=[files.filtered(late_erase)]
    )
    triage = Agent(
        append_only([call("lookup", {"order": "A1"}), call("transfer_to_billing", {})]),
        system="You route.",
        tools=[lookup],
        handoffs=[handoff(billing, input_filter=remove_tool_calls)],
        config=config(context_window=1000),
    )
    run = await triage.run("cancel my plan")
    assert run.output == "Gone."
    requests = billing_model.requests
    assert {r.system for r in requests} == {"You bill."}  # the receiver's own base
    assert all([t.name for t in r.tools] == ["look"] for r in requests)  # its base's tools
    first_look = ["assistant: call look", "tool: result conten"]
    assert [said(r.messages) for r in requests] == [
        ["user: cancel my plan"],  # the tools its toolsets offer first are in the base (28)
        ["user: cancel my plan", *first_look, "system: "],  # a later change: an entry
        ["user: summary", "system: ", *first_look],  # the view, compacted
    ]
    assert [changes(r.messages) for r in requests][-1] == [["erase"]]  # the entry stays
    assert isinstance(requests[1].messages[1].parts[0], ThinkingPart)  # sent as it came
    history = triage.history
    assert history[0].role == "system" and "You route." in history[0].text  # the session's base
    # the receiver's entry changed its view's base, not the session's: the view's alone
    assert changes(history) == [["lookup", "transfer_to_billing"]]
    # the receiver's thinking, bound to its own conversation, leaves the history at the end,
    # also what came before the compaction (from the handoff on, not from the pass on)
    assert not any(isinstance(p, ThinkingPart) for m in history for p in m.parts)
    assert len(history) == 6 + 5  # the base, the starting agent's five, the receiver's five
    assert said(history)[-1] == "assistant: Gone."
