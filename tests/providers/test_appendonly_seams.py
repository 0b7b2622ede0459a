"""SPEC 28's goal where it meets the other features, on the twin of an append-only Claude.

Memory (the memory tool and auto recall, SPEC 27), toolsets changing their tools mid-run and
local tool search loading a tool (22), a handoff to a receiver with other instructions and
tools (26, with and without an input filter) and a provider tool (web search, 24): each runs
several turns over 3 runs with no request refused for a changed prefix, and the top-level
``system`` and ``tools`` are the same bytes on every request (the changes travel as entries).
"""

from __future__ import annotations

import json
from typing import Any

from agentloop import Agent, RunConfig, tool
from agentloop.memory import InMemoryMemoryStore, Memory
from agentloop.model import ModelSettings
from agentloop.providers.settings import Settings, build_client

from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

KEY = "sk-ant-twin-0123456789"
MODEL = "claude-fable-5-1"
CONFIG = RunConfig(model_settings=ModelSettings(reasoning_effort="low"))


@tool
def read(page: int) -> str:
    """Read a page."""
    return f"page {page}"


def step(run: int, n: int, name: str, arguments: dict[str, Any]) -> TwinReply:
    return TwinReply([twin.thinking(f"r{run} s{n}"), twin.tool_use(name, arguments)], "tool_use")


def answer(text: str) -> TwinReply:
    return TwinReply([twin.thinking(f"answering {text}"), twin.text(text)])


def client_of(server: AnthropicTwin) -> Any:
    return build_client(
        Settings(provider="anthropic", model=MODEL, api_key=KEY, base_url=server.url)
    )


def encoded(body: dict[str, Any], key: str) -> str:
    return json.dumps(body.get(key), sort_keys=True)


def same_base(server: AnthropicTwin) -> None:
    """No prefix failure; one ``system`` and one ``tools`` across every request."""
    assert server.rejected == []
    assert len({encoded(b, "system") for b in server.requests}) == 1
    assert len({encoded(b, "tools") for b in server.requests}) == 1


def system_entries(body: dict[str, Any]) -> list[Any]:
    return [m for m in body["messages"] if m["role"] == "system"]


def user(ctx: Any) -> tuple[str, ...]:
    return ("user", "ada")


async def test_memory_recall_and_the_memory_tool_over_three_runs() -> None:
    store = InMemoryMemoryStore()
    await store.put(("user", "ada"), "ada likes tea")
    await store.put(("user", "ada"), "ada lives in paris")
    create = {"command": "create", "path": "/memories/books", "file_text": "ada reads novels"}
    script = [
        step(1, 0, "read", {"page": 1}),
        step(1, 1, "memory", create),
        answer("one"),
        step(2, 0, "memory", {"command": "view", "path": "/memories"}),
        answer("two"),
        step(3, 0, "read", {"page": 3}),
        answer("three"),
    ]
    async with AnthropicTwin(script) as server:
        agent = Agent(
            client_of(server),
            instructions="You remember.",
            tools=[read],
            memory=Memory(store, namespace=user, auto_recall=3),
            config=CONFIG,
        )
        runs = [await agent.run(q) for q in ("tea please", "where is paris", "novels and tea")]
    assert [r.output for r in runs] == ["one", "two", "three"]
    same_base(server)
    first = server.requests[0]
    assert "Memories from earlier" not in encoded(first, "system")  # never in the base
    recalls = [
        [e for e in system_entries(b) if "Memories from earlier" in json.dumps(e)]
        for b in server.requests
    ]
    assert all(recalls)  # every request carries its run's recall as an entry
    assert "ada likes tea" in json.dumps(recalls[0][-1])
    assert "ada lives in paris" in json.dumps(recalls[3][-1])
    assert "ada reads novels" in json.dumps(recalls[5][-1])  # run 1's memory, recalled in run 3
    history = agent.history
    assert history[0].role == "system" and "Memories" not in (history[0].text or "")
