"""The records the engine builds each turn, field by field.

``engine.turn.build_request`` and ``engine.loop.RunLoop._record`` build ``ModelRequest`` and
``Turn`` positionally (keywords cost the generated ``__init__`` about half a microsecond each
time): a reordered field must fail here, not mislabel a value.
"""

from __future__ import annotations

from dataclasses import fields

from agentloop import Agent, tool
from agentloop.messages import Message, TextPart, ThinkingPart, ToolCallPart, Usage
from agentloop.model import ModelRequest, ModelResponse
from agentloop.run import Turn
from agentloop.testing import ScriptedModel, reply


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def test_the_positional_records_keep_their_field_order() -> None:
    assert [f.name for f in fields(ModelRequest)] == [
        "messages", "tools", "system", "settings", "model", "events", "output", "session_id",
        "compact_at", "provider_tools",
    ]  # fmt: skip
    assert [f.name for f in fields(Turn)] == [
        "index", "model", "tool_calls", "tool_results", "usage", "stop_reason", "text",
        "thinking", "latency_seconds", "durations", "warnings", "agent", "batch",
    ]  # fmt: skip


async def test_a_turn_and_its_request_hold_each_value_in_its_field() -> None:
    asked = ToolCallPart("c1", "lookup", {"key": "k"})
    thought = ModelResponse(
        Message("assistant", (ThinkingPart("hmm"), TextPart("let me see"), asked)),
        Usage(7, 3),
        model="m-1",
        stop_reason="tool_use",
    )
    model = ScriptedModel([thought, reply("done", usage=Usage(2, 1))])
    agent = Agent(model, tools=[lookup], instructions="Be brief.")
    session = agent.session()
    run = await session.run("go")
    request = model.requests[0]
    assert request.messages == (Message.user("go"),)
    assert [t.name for t in request.tools] == ["lookup"]
    assert request.system == "Be brief."
    assert request.model is None and request.output is None and request.compact_at is None
    assert request.session_id == session.id
    assert tuple(request.provider_tools) == ()
    first = run.turns[0]
    assert (first.index, first.model, first.tool_calls) == (0, "m-1", [asked])
    assert [r.content for r in first.tool_results] == ["value of k"]
    assert (first.usage, first.stop_reason) == (Usage(7, 3), "tool_use")
    assert (first.text, first.thinking) == ("let me see", "hmm")
    assert first.latency_seconds is not None and first.latency_seconds >= 0
    assert first.durations is None or set(first.durations) == {"c1"}  # a zero duration: none
    assert (first.warnings, first.agent, first.batch) == (None, None, False)
    last = run.turns[1]
    assert (last.index, last.tool_calls, last.tool_results, last.thinking) == (1, [], [], "")
    assert run.usage == Usage(9, 4)
