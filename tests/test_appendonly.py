"""The engine's side of append-only conversations (SPEC 28), on test doubles (pure logic).

What goes to a real provider is tested against the Anthropic twin
(``tests/providers/test_appendonly_twin.py``); here: the base, the one per-call step that
records changes, the transcript rules, compaction's result, and that a run on a model that is
not append-only is exactly what it was.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import Agent, FallbackClient, RunConfig, tool
from agentloop.context import TruncatingCompactor
from agentloop.engine.appendonly import AppendOnly, kept_after_compaction, tool_change
from agentloop.errors import TranscriptError
from agentloop.messages import Message, TextPart, ThinkingPart, ToolChangePart
from agentloop.model import ModelRequest, ToolSpec, is_append_only, with_tool_changes
from agentloop.testing import ScriptedModel, call, reply
from agentloop.transcript import validate_transcript


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def note(text: str) -> str:
    """Take a note."""
    return "noted"


def append_only(steps: list[Any]) -> ScriptedModel:
    model = ScriptedModel(steps)
    model.append_only = True  # type: ignore[attr-defined]
    return model


def spec(name: str, description: str = "d") -> ToolSpec:
    return ToolSpec(name, description, {"type": "object", "properties": {}})


async def test_a_model_that_is_not_append_only_runs_as_before() -> None:
    model = ScriptedModel([call("look", {"q": "x"}), reply("done"), reply("again")])
    agent = Agent(model, instructions=lambda: "dynamic", tools=[look])
    await agent.run("a")
    await agent.run("b")
    assert [m.role for m in agent.history] == ["user", "assistant", "tool", "assistant"] * 1 + [
        "user",
        "assistant",
    ]
    assert all(r.system == "dynamic" and r.messages[0].role == "user" for r in model.requests)
    assert not any(m.role == "system" for r in model.requests for m in r.messages)


async def test_the_base_opens_the_history_and_travels_as_system_and_tools() -> None:
    model = append_only([call("look", {"q": "x"}), reply("done")])
    agent = Agent(model, instructions="Be brief.", tools=[look])
    run = await agent.run("a")
    base = Message("system", (TextPart("Be brief."), ToolChangePart(added=(look.spec(),))))
    assert agent.history[0] == base and run.conversation[0] == base
    for request in model.requests:
        assert request.system == "Be brief." and list(request.tools) == [look.spec()]
        assert request.messages[0] == Message.user("a")  # messages start after the base


async def test_nothing_changed_no_entry_and_each_change_one_entry() -> None:
    texts = iter(["one", "one", "two"])
    model = append_only([reply("1"), reply("2"), reply("3")])
    agent = Agent(model, instructions=lambda: next(texts), tools=[look])
    for q in "abc":
        await agent.run(q)
    systems = [m for m in agent.history if m.role == "system"]
    assert [m.text for m in systems] == ["one", "two"]  # the base, then the change in full
    assert model.requests[2].messages[-1] == Message.system("two")  # after the run's input


def test_tools_are_compared_by_name_and_canonical_json_order_ignored() -> None:
    a, b = spec("a"), spec("b")
    assert tool_change((a, b), (b, a)) is None
    assert tool_change((a,), (spec("a"),)) is None  # equal, not the same object
    changed = spec("a", "new description")
    assert tool_change((a, b), (changed, b)) == ToolChangePart(added=(changed,), removed=("a",))
    assert tool_change((a, b), (a,)) == ToolChangePart(removed=("b",))


def test_an_unchanged_call_costs_identity_checks() -> None:
    conversation = AppendOnly()
    tools = (spec("a"),)
    conversation.text, conversation.tools = "x", tools
    assert conversation.changes("x", tools) == []
    assert conversation.changes("y", tools) == [Message.system("y")]


async def test_a_fallback_with_one_append_only_model_makes_the_conversation_append_only() -> None:
    plain, newest = ScriptedModel([reply("x")]), append_only([])
    assert not is_append_only(plain) and is_append_only(newest)
    assert is_append_only(FallbackClient([plain, newest]))


def test_a_transcript_may_hold_entries_with_or_without_a_base() -> None:
    base = Message("system", (TextPart("x"), ToolChangePart()))
    validate_transcript([base, Message.user("a"), Message.assistant("b"), Message.system("y")])
    validate_transcript([Message.user("a"), Message.system("y")])  # SPEC 12 (amended)
    with pytest.raises(TranscriptError, match="first message must be a user message"):
        validate_transcript([base, Message.assistant("b")])
    with pytest.raises(TranscriptError, match="first message must be a user message"):
        validate_transcript([base, Message.system("y"), Message.assistant("b")])


def test_entries_survive_to_dict() -> None:
    entry = Message("system", (ToolChangePart(added=(spec("a"),), removed=("b",)),))
    assert Message.from_dict(entry.to_dict()) == entry


def test_compaction_keeps_every_entry_and_drops_stale_thinking() -> None:
    base = Message("system", (TextPart("x"), ToolChangePart()))
    thought = ThinkingPart("t", signature="s", provider="anthropic")
    turns = [Message.user("q")]
    for n in range(6):
        turns.append(Message("assistant", (thought, TextPart(f"a{n}"))))
        turns.append(Message.user(f"q{n}"))
        if n == 2:
            turns.append(Message.system("changed"))
    before = [base, *turns]
    cut = TruncatingCompactor(preserve_recent=3, min_messages=4).truncate(before)
    kept = kept_after_compaction(before, cut)
    assert kept[0] is base and kept[1] == Message.user("q")
    assert Message.system("changed") in kept
    first_changed = next(i for i, m in enumerate(kept) if before[i] is not m)
    assert not any(m.thinking for m in kept[first_changed:])


def test_an_adapter_with_one_tools_list_applies_the_changes() -> None:
    a, b = spec("a"), spec("b")
    request = ModelRequest(
        [Message.user("q"), Message("system", (ToolChangePart(added=(b,), removed=("a",)),))],
        tools=(a,),
    )
    assert list(with_tool_changes(request).tools) == [b]
    plain = ModelRequest([Message.user("q")], tools=(a,))
    assert with_tool_changes(plain) is plain


async def test_compaction_on_an_append_only_run_keeps_the_base_first() -> None:
    @tool
    def big(n: int) -> str:
        """Return a lot."""
        return "x" * 4000

    steps: list[Any] = [call("big", {"n": n}) for n in range(8)]
    model = append_only([*steps, reply("done")])
    agent = Agent(model, instructions="x", tools=[big], config=RunConfig(context_window=4_000))
    await agent.run("go")
    assert agent.history[0].role == "system" and agent.history[1] == Message.user("go")
    assert all(r.system == "x" for r in model.requests)


async def test_a_conversation_that_opened_append_only_stays_so_on_another_model() -> None:
    first = append_only([reply("one")])
    agent = Agent(first, instructions="Be brief.", tools=[look])
    await agent.run("a")
    plain = ScriptedModel([reply("two")])
    later = Agent(plain, instructions="Be thorough.", history=agent.history)
    await later.run("b")
    (request,) = plain.requests
    assert request.system == "Be brief." and list(request.tools) == [look.spec()]
    assert request.messages[-1] == Message("system", (ToolChangePart(removed=("look",)),))
    assert request.messages[-2] == Message.system("Be thorough.")
