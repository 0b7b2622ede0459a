"""Issue 40's acceptance on the twin of an append-only Claude: 20 turns over 3 runs.

Instructions that change every run (a prompt function), compaction (a small window), a real MCP
server's list change, and an output guardrail that sends a rejected answer back: no request is
ever refused for a changed prefix. On a model with mid-conversation system messages ``system``
and ``tools`` are the same bytes on every request; on one without, they change only where an
entry was folded in, and a run that changes nothing sends them unchanged.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.guardrails import GuardrailContext, OutputGuardrail
from agentloop.mcp import MCPServer
from agentloop.model import ModelSettings
from agentloop.providers.settings import Settings, build_client
from agentloop.testing import RecordingObserver

from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply

KEY = "sk-ant-twin-0123456789"
FAULTY = Path(__file__).parent.parent / "mcp_servers" / "faulty.py"


@tool
def read(page: int) -> str:
    """Read a page."""
    return f"page {page}: " + "lorem ipsum " * 40


def leaks(ctx: GuardrailContext[Any], value: Any) -> str | None:
    return "the answer quotes a key" if "sk-" in str(value) else None


def reads(run: int, pages: int) -> list[TwinReply]:
    return [
        TwinReply([twin.thinking(f"r{run} p{n}"), twin.tool_use("read", {"page": n})], "tool_use")
        for n in range(pages)
    ]


def answer(text: str) -> TwinReply:
    return TwinReply([twin.thinking(f"answering {text}"), twin.text(text)])


SCRIPT = [
    *reads(1, 6),  # run 1: ten turns
    TwinReply([twin.thinking("grow"), twin.tool_use("grow", {})], "tool_use"),
    TwinReply([twin.thinking("late"), twin.tool_use("late", {})], "tool_use"),
    answer("the key is sk-123"),  # rejected by the guardrail, answered again
    answer("one"),
    *reads(2, 5),  # run 2: six turns
    answer("two"),
    *reads(3, 3),  # run 3: four turns
    answer("three"),
]


class Versions:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"You read books (version {self.n})."


def encoded(body: dict[str, Any], key: str) -> str:
    return json.dumps(body.get(key), sort_keys=True)


@pytest.mark.parametrize("model", ["claude-fable-5-1", "claude-opus-5-5", "claude-mythos-5-2"])
async def test_twenty_turns_three_runs_no_prefix_failure(model: str, tmp_path: Path) -> None:
    env = {**os.environ, "MARKER_DIR": str(tmp_path)}
    mcp = MCPServer.stdio(sys.executable, [str(FAULTY)], env=env, name="faulty")
    seen = RecordingObserver()
    config = RunConfig(
        model_settings=ModelSettings(reasoning_effort="high"),
        context_window=2_500,
        compaction="local",  # the local compactor: server-side compaction is tested apart
    )
    async with AnthropicTwin(list(SCRIPT)) as server:
        client = build_client(
            Settings(provider="anthropic", model=model, api_key=KEY, base_url=server.url)
        )
        async with Agent(
            client,
            instructions=Versions(),
            tools=[read, mcp],
            config=config,
            guardrails=[OutputGuardrail(leaks, retry=True)],
            observers=[seen],
        ) as agent:
            outputs = [(await agent.run(q)).output for q in ("first", "second", "third")]
    assert outputs == ["one", "two", "three"]
    assert server.rejected == []
    assert len(server.requests) == 20
    assert seen.of("on_compaction")  # the window made the engine compact
    assert "sk-123" not in json.dumps(server.requests[-1])  # the rejected answer's placeholder
    systems = {encoded(b, "system") for b in server.requests}
    tools = {encoded(b, "tools") for b in server.requests}
    if model != "claude-mythos-5-2":  # entries in place: the base never changes
        assert len(systems) == 1 and len(tools) == 1
    else:  # folded: system changes with each run's text, tools once (late)
        assert len(systems) == 3 and len(tools) == 2


@pytest.mark.parametrize("model", ["claude-fable-5-1", "claude-mythos-5-2"])
async def test_a_conversation_that_changes_nothing_sends_the_same_system_and_tools(
    model: str,
) -> None:
    script = [*reads(1, 3), answer("a"), *reads(2, 2), answer("b"), *reads(3, 1), answer("c")]
    async with AnthropicTwin(script) as server:
        client = build_client(
            Settings(provider="anthropic", model=model, api_key=KEY, base_url=server.url)
        )
        agent = Agent(
            client,
            instructions="You read books.",
            tools=[read],
            config=RunConfig(model_settings=ModelSettings(reasoning_effort="low")),
        )
        for q in ("a", "b", "c"):
            await agent.run(q)
    assert server.rejected == [] and len(server.requests) == 9
    assert len({encoded(b, "system") for b in server.requests}) == 1
    assert len({encoded(b, "tools") for b in server.requests}) == 1
    assert not any(m["role"] == "system" for b in server.requests for m in b["messages"])
