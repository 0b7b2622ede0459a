"""Append-only conversations (SPEC 28) through the public API against the Anthropic twin.

The twin (``twins/anthropic_prefix.py``) binds every thinking block it serves on an append-only
model to a hash of everything before it, and answers the documented 400 ("bound to a different
conversation") when a later request changed any of it. Issue 40's breaks 1-3 (instructions that
change, compaction, a tool list that changes) run here without one such 400.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agentloop import Agent, FallbackClient, Observer, RunConfig, tool
from agentloop.errors import BadRequestError
from agentloop.events import Event, ThinkingDropped
from agentloop.mcp import MCPServer
from agentloop.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolChangePart,
    ToolResultPart,
)
from agentloop.model import ModelRequest, ModelSettings
from agentloop.providers.settings import Settings, build_client
from agentloop.store import SQLiteStore
from agentloop.testing import RecordingObserver

from .twins import anthropic as twin
from .twins.anthropic import AnthropicTwin, TwinReply
from .twins.anthropic_prefix import PREFIX_MISMATCH

KEY = "sk-ant-twin-0123456789"
EFFORT = ModelSettings(reasoning_effort="low")


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def note(text: str) -> str:
    """Take a note."""
    return "noted"


def client(url: str, model: str) -> Any:
    return build_client(
        Settings(provider="anthropic", model=model, api_key=KEY, base_url=url, max_retries=0)
    )


def turn(n: int) -> list[TwinReply]:
    """One run: a thought and a tool call, then a thought and an answer."""
    return [
        TwinReply([twin.thinking(f"step {n}"), twin.tool_use("look", {"q": str(n)})], "tool_use"),
        TwinReply([twin.thinking(f"done {n}"), twin.text(f"answer {n}")]),
    ]


def same(bodies: list[dict[str, Any]], key: str) -> bool:
    """Whether every request sent ``key`` as the same bytes (breakpoints included)."""
    return len({json.dumps(b.get(key), sort_keys=True) for b in bodies}) == 1


class Versions:
    """A prompt function whose text changes on every run."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"You are helpful (version {self.n})."


@pytest.mark.parametrize("model", ["claude-fable-5-1", "claude-opus-5-5"])
async def test_changing_instructions_go_in_place_and_system_never_changes(model: str) -> None:
    """Break 1 on a model with mid-conversation system messages."""
    async with AnthropicTwin([*turn(1), *turn(2), *turn(3)]) as server:
        agent = Agent(
            client(server.url, model),
            instructions=Versions(),
            tools=[look],
            config=RunConfig(model_settings=EFFORT),
        )
        for n in range(3):
            assert (await agent.run(f"q{n}")).output == f"answer {n + 1}"
    assert server.rejected == []
    assert same(server.requests, "system") and same(server.requests, "tools")
    last = server.requests[-1]["messages"]
    entries = [m for m in last if m["role"] == "system"]
    assert [e["content"] for e in entries] == [
        [{"type": "text", "text": "You are helpful (version 2)."}],
        [{"type": "text", "text": "You are helpful (version 3)."}],
    ]
    assert [m["role"] for m in last[-4:]] == ["user", "system", "assistant", "user"]
    history = agent.history
    assert history[0] == Message(
        "system",
        (TextPart("You are helpful (version 1)."), ToolChangePart(added=(look.spec(),))),
    )


async def test_changing_instructions_fold_into_system_without_the_flag() -> None:
    """Break 1 on an append-only model without mid-conversation messages (Mythos 5.2)."""
    async with AnthropicTwin([*turn(1), *turn(2)]) as server:
        agent = Agent(
            client(server.url, "claude-mythos-5-2"),
            instructions=Versions(),
            tools=[look],
            config=RunConfig(model_settings=EFFORT),
        )
        await agent.run("a")
        await agent.run("b")
    assert server.rejected == []
    second_run = server.requests[2:]
    assert all(b["system"][0]["text"].endswith("(version 2).") for b in second_run)
    kinds = [[c["type"] for c in m["content"]] for m in second_run[0]["messages"]]
    assert ["thinking", "tool_use"] not in kinds  # the first run's thinking is left out
    assert kinds[-1] == ["text"]  # b
    assert second_run[1]["messages"][-2]["content"][0]["type"] == "thinking"  # this run's kept


def test_the_twin_answers_the_documented_400_text() -> None:
    assert "The block is bound to a different conversation" in PREFIX_MISMATCH


# -- tools that change mid-run: a real MCP server's list change (break 3) -------------------------

FAULTY = Path(__file__).parent.parent / "mcp_servers" / "faulty.py"


def faulty(tmp_path: Path) -> MCPServer:
    env = {**os.environ, "MARKER_DIR": str(tmp_path)}
    return MCPServer.stdio(sys.executable, [str(FAULTY)], env=env, name="faulty")


GROWING = [
    TwinReply([twin.thinking("grow first"), twin.tool_use("grow", {})], "tool_use"),
    TwinReply([twin.thinking("now late"), twin.tool_use("late", {})], "tool_use"),
    TwinReply([twin.thinking("done"), twin.text("grown and late")]),
]


async def test_an_mcp_list_change_is_a_tool_addition_in_place(tmp_path: Path) -> None:
    """Break 3 where the model takes tool changes: ``tools`` stays the base, byte for byte."""
    async with AnthropicTwin(list(GROWING)) as server:
        model = client(server.url, "claude-fable-5-1")
        config = RunConfig(model_settings=EFFORT)
        async with Agent(model, tools=[faulty(tmp_path)], config=config) as agent:
            run = await agent.run("go")
    assert run.output == "grown and late" and server.rejected == []
    assert same(server.requests, "tools") and same(server.requests, "system")
    assert "late" not in [t["name"] for t in server.requests[0]["tools"]]
    entry = server.requests[1]["messages"][-1]
    assert entry["role"] == "system"
    assert [b["type"] for b in entry["content"]] == ["tool_addition"]
    assert entry["content"][0]["tool"]["name"] == "late"  # by value: not in the base tools
    history = agent.history
    assert [p.added[0].name for p in history[4].parts if isinstance(p, ToolChangePart)] == ["late"]


async def test_an_mcp_list_change_folds_into_tools_without_the_flag(tmp_path: Path) -> None:
    """Break 3 on Mythos 5.2: ``tools`` grows and the thinking before the change is left out."""
    async with AnthropicTwin(list(GROWING)) as server:
        model = client(server.url, "claude-mythos-5-2")
        config = RunConfig(model_settings=EFFORT)
        async with Agent(model, tools=[faulty(tmp_path)], config=config) as agent:
            run = await agent.run("go")
    assert run.output == "grown and late" and server.rejected == []
    assert "late" in [t["name"] for t in server.requests[1]["tools"]]
    first_turn = server.requests[2]["messages"][1]
    assert [b["type"] for b in first_turn["content"]] == ["tool_use"]  # its thinking left out
    second_turn = server.requests[2]["messages"][3]
    assert second_turn["content"][0]["type"] == "thinking"


# -- the 400 itself ----------------------------------------------------------------------------


async def test_a_changed_prefix_is_a_bad_request_never_retried_nor_a_fallback_reason() -> None:
    first = [TwinReply([twin.thinking("t"), twin.tool_use("look", {"q": "x"})], "tool_use")]
    async with AnthropicTwin(first) as server, AnthropicTwin([]) as other:
        retrying = build_client(
            Settings(
                provider="anthropic",
                model="claude-fable-5-1",
                api_key=KEY,
                base_url=server.url,
                max_retries=3,
            )
        )
        fallback = FallbackClient([retrying, client(other.url, "claude-opus-5-5")])
        request = ModelRequest([Message.user("q")], tools=(look.spec(),), settings=EFFORT)
        reply = await fallback.complete(request)
        transcript = [Message.user("another q"), reply.message]  # the question was edited
        results = Message.tool_results(
            [ToolResultPart(reply.message.tool_calls[0].id, "look", "found")]
        )
        again = ModelRequest([*transcript, results], tools=(look.spec(),), settings=EFFORT)
        with pytest.raises(BadRequestError) as info:
            await fallback.complete(again)
        await fallback.aclose()
    assert "bound to a different conversation" in str(info.value)
    assert "messages.1.content.0" in str(info.value)  # the provider's words name the block
    assert len(server.rejected) == 1  # not retried
    assert other.requests == [] and other.rejected == []  # not a reason to fall back


# -- compaction (break 2), the store, a seeded history ----------------------------------------


@tool
def read(page: int) -> str:
    """Read a page."""
    return f"page {page}: " + "lorem ipsum " * 60


def reading(pages: int) -> list[TwinReply]:
    steps = [
        TwinReply([twin.thinking(f"page {n}"), twin.tool_use("read", {"page": n})], "tool_use")
        for n in range(pages)
    ]
    return [*steps, TwinReply([twin.thinking("enough"), twin.text("read it all")])]


@pytest.mark.parametrize("model", ["claude-fable-5-1", "claude-mythos-5-2"])
async def test_compaction_drops_the_thinking_whose_prefix_changed(model: str) -> None:
    """Break 2: the kept tail's thinking is never sent after its prefix changed."""
    config = RunConfig(model_settings=EFFORT, context_window=3_000, compaction="local")
    async with AnthropicTwin(reading(12)) as server:
        seen = RecordingObserver()
        agent = Agent(
            client(server.url, model),
            instructions="Read.",
            tools=[read],
            config=config,
            observers=[seen],
        )
        run = await agent.run("read the book")
    assert run.output == "read it all" and server.rejected == []
    assert seen.of("on_compaction")
    assert same(server.requests, "system") and same(server.requests, "tools")
    history = agent.history
    assert history[0].role == "system" and history[1] == Message.user("read the book")


async def test_a_resumed_session_keeps_its_base_and_appends_what_changed(tmp_path: Path) -> None:
    """The stored base, never the agent of the moment: a new prompt is an entry, not a system."""
    path = tmp_path / "s.db"
    async with AnthropicTwin([*turn(1), *turn(2)]) as server:
        with SQLiteStore(path) as store:
            first = Agent(
                client(server.url, "claude-fable-5-1"),
                instructions="Be brief.",
                tools=[look],
                store=store,
                config=RunConfig(model_settings=EFFORT),
            )
            await first.session("user-1").run("a")
        with SQLiteStore(path) as store:
            again = Agent.resume(
                "user-1",
                store=store,
                client=client(server.url, "claude-fable-5-1"),
                instructions="Be thorough.",
                tools=[look, note],
                config=RunConfig(model_settings=EFFORT),
            )
            await again.run("b")
    assert server.rejected == []
    assert same(server.requests, "system") and same(server.requests, "tools")
    assert server.requests[-1]["system"][0]["text"] == "Be brief."
    entries = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "system"]
    text, added = entries[0]  # two entries before one assistant turn: one system message
    assert text == {"type": "text", "text": "Be thorough."}
    assert added["type"] == "tool_addition" and added["tool"]["name"] == "note"


async def test_a_seeded_history_without_a_base_starts_anew_and_sends_no_thinking() -> None:
    seeded = [
        Message.user("earlier"),
        Message(
            "assistant",
            (ThinkingPart("old", signature="sig-from-elsewhere", provider="anthropic"),
             TextPart("earlier answer")),
        ),
    ]  # fmt: skip
    async with AnthropicTwin(turn(1)) as server:
        agent = Agent(
            client(server.url, "claude-fable-5-1"),
            instructions="Hi.",
            tools=[look],
            history=seeded,
            config=RunConfig(model_settings=EFFORT),
        )
        await agent.run("now")
    assert server.rejected == []
    assert server.requests[0]["messages"][1]["content"] == [
        {"type": "text", "text": "earlier answer"}
    ]
    assert agent.history[0].role == "system" and agent.history[1] == Message.user("earlier")


async def test_a_conversation_survives_to_dict_and_continues_in_a_new_session() -> None:
    async with AnthropicTwin([*turn(1), *turn(2)]) as server:
        agent = Agent(
            client(server.url, "claude-fable-5-1"),
            instructions=Versions(),
            tools=[look],
            config=RunConfig(model_settings=EFFORT),
        )
        run = await agent.run("a")
        stored = [Message.from_dict(m.to_dict()) for m in run.conversation]
        assert stored == run.conversation
        await agent.session(history=stored).run("b")
    assert server.rejected == []
    assert same(server.requests, "system") and same(server.requests, "tools")


# -- the escape hatch: drop_block ---------------------------------------------------------------


class Seen(Observer):
    def __init__(self) -> None:
        self.events: list[Event] = []

    def on_event(self, event: Event) -> None:
        self.events.append(event)


async def test_drop_block_lets_an_edited_history_go_on_and_says_what_was_dropped() -> None:
    """A history edited before SPEC 28: a 400 by default, dropped blocks with ``drop_block``."""
    async with AnthropicTwin([*turn(1), *turn(2), *turn(3)]) as server:
        agent = Agent(
            client(server.url, "claude-fable-5-1"),
            instructions="Hi.",
            tools=[look],
            config=RunConfig(model_settings=EFFORT),
        )
        await agent.run("first")
        edited = list(agent.history)
        edited[1] = Message.user("first, edited")  # rewritten after a thought was served
        with pytest.raises(BadRequestError, match="bound to a different conversation"):
            await agent.session(history=edited).run("second")
        seen = Seen()
        hatch = Agent(
            client(server.url, "claude-fable-5-1"),
            instructions="Hi.",
            tools=[look],
            observers=[seen],
            config=RunConfig(model_settings=EFFORT),
        )
        session = hatch.session(history=edited)
        drop = ModelSettings(reasoning_effort="low", thinking_prefix_mismatch="drop_block")
        await session.run("second", model_settings=drop)
        await session.run("third")  # not told again: the session keeps it on
    assert len(server.rejected) == 1  # the default: the documented 400, nothing dropped
    for body in server.requests[-4:]:  # both runs of the session, each of their requests
        assert body["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
    dropped = [e for e in seen.events if isinstance(e, ThinkingDropped)]
    assert len(dropped) == 4  # the blocks stay in the transcript: every request drops them
    assert [b["message"] for b in dropped[0].blocks] == [1, 3]  # the edited run's two thoughts


# -- model switches, paused runs, the 400 for each break ---------------------------------------


async def test_a_switch_to_another_model_sends_the_blocks_unchanged_and_is_no_error() -> None:
    async with AnthropicTwin([*turn(1), *turn(2)]) as server:
        first = Agent(
            client(server.url, "claude-fable-5-1"),
            instructions="Hi.",
            tools=[look],
            config=RunConfig(model_settings=EFFORT),
        )
        await first.run("a")
        then = Agent(
            client(server.url, "claude-opus-5-5"),
            instructions="Hi.",
            tools=[look],
            history=first.history,
            config=RunConfig(model_settings=EFFORT),
        )
        run = await then.run("b")
    assert run.output == "answer 2" and server.rejected == []
    sent = server.requests[2]["messages"]
    assert sent[1]["content"][0] == server.requests[1]["messages"][1]["content"][0]
    kinds = [b["type"] for m in sent for b in m["content"]]
    assert kinds.count("thinking") == 2  # Fable's two thoughts go to Opus unchanged
    assert then.history[:5] == first.history[:5]  # nothing recorded as lost


async def test_a_paused_run_continues_on_the_same_conversation() -> None:
    from agentloop import Approve

    @tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    script = [
        TwinReply(
            [twin.thinking("refund it"), twin.tool_use("refund", {"order": "A1"})], "tool_use"
        ),
        TwinReply([twin.thinking("done"), twin.text("refunded")]),
    ]
    async with AnthropicTwin(script) as server:
        agent = Agent(
            client(server.url, "claude-fable-5-1"),
            instructions=Versions(),
            tools=[refund],
            config=RunConfig(model_settings=EFFORT),
        )
        run = await agent.run("refund A1")
        assert run.pending
        continued = await agent.continue_run(decisions={run.pending[0].id: Approve()})
    assert continued.output == "refunded" and server.rejected == []
    assert same(server.requests, "system") and same(server.requests, "tools")
    assert agent.history[0].role == "system"


@pytest.mark.parametrize("edit", ["system", "tools", "earlier message dropped"])
async def test_the_twin_answers_issue_40s_breaks_1_to_3_with_the_documented_400(edit: str) -> None:
    """What the loop used to send (a rewritten system, rewritten tools, a compacted middle)."""
    first = TwinReply([twin.thinking("t1"), twin.tool_use("look", {"q": "1"})], "tool_use")
    second = TwinReply([twin.thinking("t2"), twin.tool_use("look", {"q": "2"})], "tool_use")
    async with AnthropicTwin([first, second]) as server:
        claude = client(server.url, "claude-fable-5-1")
        transcript = [Message.user("q")]
        for step in range(2):
            request = ModelRequest(transcript, (look.spec(),), "v1", settings=EFFORT)
            reply = await claude.complete(request)
            call_id = reply.message.tool_calls[0].id
            results = Message.tool_results([ToolResultPart(call_id, "look", f"r{step}")])
            transcript = [*transcript, reply.message, results]
        system, tools = "v1", [look.spec()]
        if edit == "system":
            system = "v2"
        elif edit == "tools":
            tools = [look.spec(), note.spec()]
        else:
            transcript = [transcript[0], *transcript[3:]]  # the first turn compacted away
        with pytest.raises(BadRequestError, match="bound to a different conversation"):
            await claude.complete(ModelRequest(transcript, tools, system, settings=EFFORT))
        await claude.aclose()
