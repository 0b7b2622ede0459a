"""A server-side web search and a native tool search, recorded to a cassette and replayed.

SPEC 23 x SPEC 24 x SPEC 22: the Anthropic twin plays a turn with ``server_tool_use`` and its
web search result (encrypted content, citations) beside a function call, on requests that offer
a deferred tool to the native tool search; whole and streamed. Recorded with ``mode="once"``,
the run replays with the twin gone: same output, same transcript parts, every exchange played.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop import Agent, RunConfig, tool
from agentloop.cassettes import use_cassette
from agentloop.provider_tools import WebSearch

from .test_provider_tools import anthropic
from .twins import anthropic as twin
from .twins import anthropic_server_tools as st
from .twins.anthropic import AnthropicTwin, TwinReply


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool(defer_loading=True)
def archive(path: str) -> str:
    """Archive a file into cold storage."""
    return f"archived {path}"


def script() -> list[TwinReply]:
    return [
        TwinReply(
            [
                st.server_tool_use("web_search", {"query": "agentloop"}, "srvtoolu_1"),
                st.web_search_result("srvtoolu_1", [("https://a.example", "A")]),
                st.cited_text("A says it loops.", "https://a.example", "A"),
                twin.tool_use("look", {"q": "x"}),
            ],
            "tool_use",
        ),
        TwinReply([twin.text("It loops.")]),
    ]


async def runs(agent: Agent[str | None]) -> list[object]:
    first = await agent.run("does it loop?")
    return [first.output, [type(p).__name__ for m in first.messages for p in m.parts]]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_server_search_turn_replays_from_the_cassette(tmp_path: Path, stream: bool) -> None:
    tape = tmp_path / "search.yaml"
    config = RunConfig(stream=stream)
    async with AnthropicTwin(script()) as server:
        url = server.url
        agent = Agent(anthropic(url), tools=[look, archive], provider_tools=[WebSearch()],
                      config=config)  # fmt: skip
        with use_cassette(tape, mode="once"):
            recorded = await runs(agent)
        assert server.rejected == []
    again = Agent(anthropic(url), tools=[look, archive], provider_tools=[WebSearch()],
                  config=config)  # fmt: skip
    with use_cassette(tape) as cassette:
        replayed = await runs(again)
    assert replayed == recorded and cassette.all_played
    assert recorded[0] == "It loops."
