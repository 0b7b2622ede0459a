"""A provider-paused turn's text is part of the answer (SPEC 24 x 5, 9, 18).

``pause_turn`` continues the same assistant turn: through the real Anthropic adapter against the
fake server, streamed, with a ``SQLiteStore``, the text the stream delivered, ``run.output`` and
the stored run's output are the same whole answer (an A2A artifact or an MCP result reads
``run.output``: it used to be the continued reply's text alone); each turn keeps its own text.
A pause before a tool call is not part of the answer that comes after the tool's result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentloop import Agent, RunConfig, tool
from agentloop.events import TextDelta
from agentloop.provider_tools import WebSearch
from agentloop.providers import AnthropicClient
from agentloop.store.sqlite import SQLiteStore
from agentloop.testing import FakeProviderServer


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def _streamed(steps: list[dict[str, Any]], tmp_path: Path) -> tuple[str, Any, Any]:
    async with FakeProviderServer.from_script({"steps": steps}) as server:
        client = AnthropicClient(
            "claude-sonnet-4-5", api_key="sk-ant-demo", base_url=server.root_url
        )
        store = SQLiteStore(tmp_path / "runs.db")
        agent = Agent(
            client,
            tools=[add],
            provider_tools=[WebSearch()],
            store=store,
            config=RunConfig(stream=True),
        )
        async with agent.stream("Weather in Oslo?") as events:
            said = "".join([e.text async for e in events if isinstance(e, TextDelta)])
        run = events.run
        await agent.aclose()
    stored = store.load_run(run.id)
    return said, run, stored


async def test_the_answer_holds_the_text_before_the_pause(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"text": "Searching the forecast. ", "web_search": ["oslo"], "finish_reason": "pause_turn"},
        {"text": "It is 21C in Oslo."},
    ]
    said, run, stored = await _streamed(steps, tmp_path)
    assert run.output == said == "Searching the forecast. It is 21C in Oslo."
    assert stored is not None and stored.run.output == run.output
    assert [t.text for t in run.turns] == ["Searching the forecast. ", "It is 21C in Oslo."]
    assert not run.paused and [t.stop_reason for t in run.turns] == ["pause_turn", "end_turn"]


async def test_a_pause_before_a_tool_call_is_not_the_answer(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"text": "Let me look. ", "web_search": ["oslo"], "finish_reason": "pause_turn"},
        {"tool_calls": [{"name": "add", "arguments": {"a": 20, "b": 1}, "id": "toolu_add"}]},
        {"text": "It is 21C in Oslo."},
    ]
    said, run, stored = await _streamed(steps, tmp_path)
    assert said == "Let me look. It is 21C in Oslo."
    assert run.output == stored.run.output == "It is 21C in Oslo."
