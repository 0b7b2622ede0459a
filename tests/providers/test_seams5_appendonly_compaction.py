"""Server-side compaction (SPEC 28) meets entries: the model keeps the instructions in effect.

Anthropic drops every block before a ``compaction`` block it is sent back (provider-rules,
Anthropic late 2026, rule 8): a mid-conversation system message before it is gone with it,
while the top-level ``system`` and ``tools`` stay. So on a model whose entries travel in place,
a changed prompt (a callable, SPEC 21), memory recall (27) or a tool added mid-conversation
(22) would silently fall back to the base once the provider compacts, though the engine goes
on believing them in effect. Here each request the model reads after a compaction must still
state them, and every request still extends the one before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentloop import Agent, RunConfig, tool
from agentloop.model import ModelSettings
from agentloop.store import SQLiteStore
from agentloop.toolsets import FunctionToolset

from .test_seams5_appendonly_retry import Versions, look, one_conversation, twin_client
from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply
from .twins.anthropic_prefix import compaction

CONFIG = RunConfig(model_settings=ModelSettings(reasoning_effort="low"), context_window=100_000)


@tool
def rate(order: str) -> str:
    """Rate an order's service."""
    return f"rated {order}"


def seen_by_model(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages the model reads: those after the last ``compaction`` block (rule 8)."""
    messages = body["messages"]
    for index in range(len(messages) - 1, -1, -1):
        blocks = messages[index]["content"]
        kinds = [b.get("type") for b in blocks] if isinstance(blocks, list) else []
        if "compaction" in kinds:
            cut = kinds.index("compaction")
            return [{**messages[index], "content": blocks[cut:]}, *messages[index + 1 :]]
    return list(messages)


def stated(messages: list[dict[str, Any]]) -> str:
    return json.dumps([m for m in messages if m["role"] == "system"])


async def test_a_server_compaction_keeps_the_changed_prompt_and_tools_in_effect() -> None:
    compacted = TwinReply(
        [compaction("the story so far"), twin.thinking("c"), twin.tool_use("rate", {"order": "A"})],
        "tool_use",
    )
    script = [
        TwinReply([twin.thinking("t1"), twin.tool_use("look", {"q": "a"})], "tool_use"),
        TwinReply([twin.thinking("a1"), twin.text("one")]),
        compacted,  # run 2's first reply: the provider compacted everything before it
        TwinReply([twin.thinking("t3"), twin.tool_use("rate", {"order": "B"})], "tool_use"),
        TwinReply([twin.thinking("a2"), twin.text("two")]),
        TwinReply([twin.thinking("a3"), twin.text("three")]),
    ]
    offer = {"rate": False}
    rating = FunctionToolset([rate], name="rating").filtered(lambda ctx, spec: offer["rate"])
    async with AnthropicTwin(script) as server:
        agent = Agent(twin_client(server), instructions=Versions(), tools=[look], config=CONFIG,
                      toolsets=[rating])  # fmt: skip
        one = await agent.run("one")
        offer["rate"] = True
        two = await agent.run("two")
        three = await agent.run("three")
    assert (one.output, two.output, three.output) == ("one", "two", "three")
    assert server.rejected == []
    one_conversation(server.requests)
    for body in server.requests[3:5]:  # run 2 after the compaction: version 2, rate offered
        seen = stated(seen_by_model(body))
        assert "Version 2" in seen and '"rate"' in seen
    last = stated(seen_by_model(server.requests[5]))
    assert "Version 3" in last and '"rate"' in last


async def test_the_statement_after_a_compaction_is_sent_the_same_after_a_resume(
    tmp_path: Path,
) -> None:
    compacted = TwinReply(
        [compaction("so far"), twin.thinking("c"), twin.tool_use("look", {"q": "b"})], "tool_use"
    )
    script = [
        TwinReply([twin.thinking("a1"), twin.text("one")]),
        compacted,
        TwinReply([twin.thinking("a2"), twin.text("two")]),
        TwinReply([twin.thinking("a3"), twin.text("three")]),
    ]
    versions = Versions()
    async with AnthropicTwin(script) as server:
        with SQLiteStore(tmp_path / "s.db") as store:
            first = Agent(twin_client(server), instructions=versions, tools=[look],
                          config=CONFIG, store=store, session_id="s")  # fmt: skip
            await first.run("one")
            await first.run("two")
        with SQLiteStore(tmp_path / "s.db") as store:
            options: dict[str, Any] = {"instructions": versions, "tools": [look, rate]}
            again = Agent.resume("s", store=store, client=twin_client(server), config=CONFIG,
                                 **options)  # fmt: skip
            three = await again.run("three")
    assert three.output == "three" and server.rejected == []
    one_conversation(server.requests)
    seen = stated(seen_by_model(server.requests[-1]))
    assert "Version 2" in seen and "Version 3" in seen and '"rate"' in seen


def test_each_compaction_is_followed_by_what_was_in_effect_before_it() -> None:
    """Pure: two compactions, a text entry and a tool change; only in place; stable bytes."""
    from agentloop.messages import Message, ProviderPart, ToolChangePart
    from agentloop.model import ModelRequest
    from agentloop.providers.anthropic import build_payload

    def compacted(summary: str) -> Message:
        part = ProviderPart("anthropic", "compaction", {"type": "compaction", "content": summary})
        return Message("assistant", (part, *Message.assistant("ok").parts))

    messages = [
        Message.user("a"),
        Message.system("Version 2."),
        compacted("first"),
        Message.user("b"),
        Message("system", (ToolChangePart(added=(rate.spec(),), removed=("look",)),)),
        compacted("second"),
        Message.user("c"),
    ]
    request = ModelRequest(messages, system="Version 1.", tools=(look.spec(),))
    body = build_payload(request, model="claude-fable-5-1", stream=False)
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "system", "assistant", "user", "system", "assistant", "user", "system"]
    assert body["messages"][4]["content"][0] == {"type": "text", "text": "Version 2."}  # restated
    last = body["messages"][-1]["content"]
    assert last[0] == {"type": "text", "text": "Version 2."}
    assert {b["type"] for b in last[1:]} == {"tool_removal", "tool_addition"}
    assert build_payload(request, model="claude-fable-5-1", stream=False) == body
    folded = build_payload(request, model="claude-mythos-5-2", stream=False)
    roles = [m["role"] for m in folded["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]  # folded: nothing stated
