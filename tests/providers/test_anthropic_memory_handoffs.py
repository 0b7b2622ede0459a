"""A handoff receiver on Claude keeps the run's memory as Anthropic's memory tool (SPEC 26, 27).

The starting agent (a scripted model) has ``memory=``; after the handoff the receiver's requests
carry ``memory_20250818`` with its beta header (the twin refuses it otherwise), and the file it
creates is written under the run's namespace at finalize.
"""

from __future__ import annotations

from typing import Any

from agentloop import Agent
from agentloop.memory import InMemoryMemoryStore, Memory
from agentloop.providers.settings import Settings, build_client
from agentloop.testing import ScriptedModel, call

from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

NS = ("user", "ann")


def ann(ctx: Any) -> tuple[str, ...]:
    return NS


def results(run: Any) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for message in run.messages:
        for part in message.tool_results_parts:
            found.setdefault(part.name, []).append(str(part.content))
    return found


async def test_a_claude_receiver_gets_the_native_memory_tool_on_the_wire() -> None:
    store = InMemoryMemoryStore()
    create = {"command": "create", "path": "/memories/seats.md", "file_text": "aisle"}
    script = [
        TwinReply([twin.tool_use("memory", create, "toolu_1")], "tool_use"),
        TwinReply([twin.text("noted")]),
    ]
    async with AnthropicTwin(script) as server:
        claude = build_client(
            Settings(
                provider="anthropic",
                model="claude-sonnet-4-5",
                api_key="sk-ant-twin-0123456789",
                base_url=server.url,
                max_retries=0,
            )
        )
        back = Agent(claude, name="travel")
        front_model = ScriptedModel([call("transfer_to_travel", {})])
        front = Agent(front_model, handoffs=[back], memory=Memory(store, namespace=ann))
        run = await front.run("aisle, please")
        await front.aclose()
        await back.aclose()
    assert server.rejected == [] and run.output == "noted"
    tools = [
        {k: v for k, v in t.items() if k != "cache_control"} for t in server.requests[0]["tools"]
    ]
    assert tools == [{"type": "memory_20250818", "name": "memory"}]
    assert results(run)["memory"] == ["File created successfully at: /memories/seats.md"]
    item = await store.get(NS, "/memories/seats.md")
    assert item is not None and item.text == "aisle"
    start = {s.name for s in front_model.requests[0].tools}  # a scripted model: the three
    assert {"remember", "recall", "forget"} <= start
