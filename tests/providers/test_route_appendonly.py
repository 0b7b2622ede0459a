"""Append-only Claude on Bedrock and Vertex (SPEC 28): the engine's base and entries there too.

The profile table marks Claude Fable/Mythos 5.x and Opus/Sonnet/Haiku 5.5 ``append_only`` on
every route; the Bedrock and Vertex clients say so (``is_append_only``), so the engine keeps
``system`` and ``tools`` as the conversation's base and appends changes as entries. Neither route
takes mid-conversation system messages (the profile turns them off): the entries fold into
``system``, and the thinking before the last entry is left out. Both twins bind each thinking
block to a hash of its prefix and answer Anthropic's 400 when it changed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentloop import Agent, FallbackClient, RunConfig, tool
from agentloop.errors import BadRequestError
from agentloop.messages import Message
from agentloop.model import ModelSettings, is_append_only

from . import test_bedrock as bedrock
from . import test_vertex as vertex
from .twins import anthropic as claude
from .twins.bedrock import Reply

aws_env = bedrock.aws_env
google_env = vertex.google_env
EFFORT = RunConfig(model_settings=ModelSettings(reasoning_effort="low"))
BEDROCK_OPUS = "us.anthropic.claude-opus-5-5-v1:0"
BEDROCK_FABLE = "anthropic.claude-fable-5-1-v1:0"
VERTEX_OPUS = "claude-opus-5-5@20260301"
MISMATCH = "bound to a different conversation"


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    yield
    for open_ in (bedrock._OPEN, vertex._OPEN):
        while open_:
            await open_.pop().aclose()


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class Versions:
    """A prompt function whose text changes on every run."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"Version {self.n}."


def bedrock_turn(n: int) -> list[Reply]:
    return [
        Reply(reasoning=f"step {n}", calls=[("look", {"q": str(n)})], stop="tool_use"),
        Reply(reasoning=f"done {n}", text=f"answer {n}"),
    ]


def vertex_turn(n: int) -> list[claude.TwinReply]:
    return [
        claude.TwinReply(
            [claude.thinking(f"step {n}"), claude.tool_use("look", {"q": str(n)})], "tool_use"
        ),
        claude.TwinReply([claude.thinking(f"done {n}"), claude.text(f"answer {n}")]),
    ]


async def test_the_routes_say_append_only_for_the_newest_claude_only() -> None:
    async with bedrock.twin_at() as (_, b_url), vertex.twin_at() as (_, v_url):
        assert is_append_only(bedrock.client(b_url, BEDROCK_OPUS))
        assert is_append_only(bedrock.client(b_url, BEDROCK_FABLE))
        assert not is_append_only(bedrock.client(b_url, bedrock.CLAUDE))  # Sonnet 4.5
        assert is_append_only(vertex.client(v_url, VERTEX_OPUS))
        assert is_append_only(vertex.client(v_url, "claude-fable-5-1@20261001"))
        assert not is_append_only(vertex.client(v_url, "claude-sonnet-4-5@20250929"))
        assert not is_append_only(vertex.client(v_url, "gemini-3.8-flash"))
        mixed = FallbackClient(
            [vertex.client(v_url, "gemini-3.8-flash"), bedrock.client(b_url, BEDROCK_OPUS)]
        )
        assert is_append_only(mixed)


async def test_bedrock_runs_with_changing_instructions_never_break_a_prefix() -> None:
    script = [*bedrock_turn(1), *bedrock_turn(2), *bedrock_turn(3)]
    async with bedrock.twin_at(*script) as (twin, url):
        agent = Agent(bedrock.client(url, BEDROCK_OPUS), instructions=Versions(), tools=[look],
                      config=EFFORT)  # fmt: skip
        for n in (1, 2, 3):
            assert (await agent.run(f"q{n}")).output == f"answer {n}"
    assert [r.status for r in twin.received] == [200] * 6
    bodies = [r.body for r in twin.received]
    assert bodies[0]["system"][0]["text"] == "Version 1."  # the base, then folded entries
    assert [b["text"] for b in bodies[-1]["system"] if "text" in b][:3] == [
        "Version 1.",
        "Version 2.",
        "Version 3.",
    ]
    assert agent.history[0].role == "system"  # the base opens the history
    kept = [b for m in bodies[-1]["messages"] for b in m["content"] if "reasoningContent" in b]
    assert len(kept) == 1  # this run's own thought; those before the last entry left out


async def test_bedrock_twin_rejects_a_changed_prefix() -> None:
    async with bedrock.twin_at(*bedrock_turn(1), *bedrock_turn(2)) as (twin, url):
        agent = Agent(bedrock.client(url, BEDROCK_OPUS), instructions="Hi.", tools=[look],
                      config=EFFORT)  # fmt: skip
        await agent.run("first")
        edited = list(agent.history)
        user = next(i for i, m in enumerate(edited) if m.role == "user")
        edited[user] = Message.user("first, edited")  # rewritten after a thought was served
        with pytest.raises(BadRequestError, match=MISMATCH):
            await agent.session(history=edited).run("second")
    assert twin.received[-1].status == 400
    assert twin.received[-1].headers.get("X-Amz-Date")  # signed, sent, refused by the rule


async def test_vertex_runs_with_changing_instructions_never_break_a_prefix() -> None:
    script = [*vertex_turn(1), *vertex_turn(2), *vertex_turn(3)]
    async with vertex.twin_at(claude_script=script) as (twin, url):
        agent = Agent(vertex.client(url, VERTEX_OPUS), instructions=Versions(), tools=[look],
                      config=EFFORT)  # fmt: skip
        for n in (1, 2, 3):
            assert (await agent.run(f"q{n}")).output == f"answer {n}"
    assert twin.refused == [] and len(twin.bodies) == 6
    last = twin.bodies[-1]
    assert all(m["role"] != "system" for m in last["messages"])  # folded: Vertex has no entries
    assert "Version 1." in str(last["system"]) and "Version 3." in str(last["system"])
    assert "anthropic_beta" not in last  # nothing here needs a beta


async def test_vertex_twin_rejects_a_changed_prefix() -> None:
    async with vertex.twin_at(claude_script=[*vertex_turn(1), *vertex_turn(2)]) as (twin, url):
        agent = Agent(vertex.client(url, VERTEX_OPUS), instructions="Hi.", tools=[look],
                      config=EFFORT)  # fmt: skip
        await agent.run("first")
        edited = list(agent.history)
        user = next(i for i, m in enumerate(edited) if m.role == "user")
        edited[user] = Message.user("first, edited")
        with pytest.raises(BadRequestError, match=MISMATCH):
            await agent.session(history=edited).run("second")
    assert len(twin.refused) == 1 and MISMATCH in twin.refused[0]


async def test_drop_block_on_vertex_travels_as_a_body_beta() -> None:
    """SPEC 28's escape hatch on Vertex: the binding in the body with its beta, no 400."""
    async with vertex.twin_at(claude_script=[*vertex_turn(1), *vertex_turn(2)]) as (twin, url):
        agent = Agent(vertex.client(url, VERTEX_OPUS), instructions="Hi.", tools=[look],
                      config=EFFORT)  # fmt: skip
        await agent.run("first")
        edited = list(agent.history)
        user = next(i for i, m in enumerate(edited) if m.role == "user")
        edited[user] = Message.user("first, edited")
        drop = ModelSettings(reasoning_effort="low", thinking_prefix_mismatch="drop_block")
        run = await agent.session(history=edited).run("second", model_settings=drop)
    assert run.output == "answer 2" and twin.refused == []
    body: dict[str, Any] = twin.bodies[-1]
    assert body["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
    assert "thinking-binding-controls-2026-08-01" in body["anthropic_beta"]
