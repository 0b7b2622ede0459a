"""What an application holds (SPEC 12): deps, history=, lifecycle, clear construction errors."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from agentloop import Agent, Hook, ToolContext, tool
from agentloop.errors import ConfigurationError, InvalidInput, TranscriptError
from agentloop.hooks import PreToolDecision
from agentloop.messages import Message, ToolCallPart, ToolResultPart
from agentloop.testing import ScriptedModel, call, reply


@dataclass
class Deps:
    user: str
    db: dict[str, str]


@tool
def lookup(ctx: ToolContext[Deps], key: str) -> str:
    """Look a key up in the user's database."""
    return f"{ctx.deps.user}:{ctx.deps.db[key]}"


async def test_deps_reach_tools_and_hooks() -> None:
    seen: list[object] = []

    class Audit(Hook):
        async def pre_tool(self, call: ToolCallPart, ctx: ToolContext) -> PreToolDecision:
            seen.append(ctx.deps)
            return None

    deps = Deps("ann", {"k": "v"})
    model = ScriptedModel([call("lookup", {"key": "k"}), reply("ok")])
    await Agent(model, tools=[lookup], hooks=[Audit()]).run("go", deps=deps)
    assert seen == [deps]
    assert model.requests[1].messages[-1].tool_results_parts[0].content == "ann:v"
    assert "ctx" not in str(model.requests[0].tools[0].parameters)


def test_deps_reach_tools_through_run_sync() -> None:
    model = ScriptedModel([call("lookup", {"key": "k"}), reply("ok")])
    Agent(model, tools=[lookup]).run_sync("go", deps=Deps("bob", {"k": "1"}))
    assert model.requests[1].messages[-1].tool_results_parts[0].content == "bob:1"


async def test_history_seeds_the_conversation() -> None:
    kept = [Message.user("my name is Ann"), Message.assistant("hello Ann")]
    model = ScriptedModel([reply("you are Ann")])
    agent = Agent(model, history=kept)
    assert agent.history == kept
    await agent.run("who am I?")
    assert list(model.requests[0].messages) == [*kept, Message.user("who am I?")]
    assert agent.history[:2] == kept and len(agent.history) == 4


async def test_another_agents_history_can_be_handed_over() -> None:
    first = Agent(ScriptedModel([call("lookup", {"key": "k"}), reply("done")]), tools=[lookup])
    await first.run("go", deps=Deps("a", {"k": "v"}))
    second = Agent(ScriptedModel([reply("continued")]), history=first.history)
    assert (await second.run("and now?")).output == "continued"


def test_an_unsafe_history_is_refused_at_construction_naming_the_message() -> None:
    orphan_call = [
        Message.user("hi"),
        Message.assistant(calls=[ToolCallPart("c1", "lookup", {})]),
        Message.user("next"),
    ]
    with pytest.raises(TranscriptError) as caught:
        Agent(ScriptedModel([]), history=orphan_call)
    assert caught.value.index is not None
    orphan_result = [Message.user("hi"), Message.tool_results([ToolResultPart("c9", "x", "r")])]
    with pytest.raises(TranscriptError, match="message 1 \\(tool\\)"):
        Agent(ScriptedModel([]), history=orphan_result)


def test_a_history_that_is_not_messages_is_refused() -> None:
    with pytest.raises(TranscriptError, match=r"history\[1\]"):
        Agent(ScriptedModel([]), history=[Message.user("a"), {"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(TranscriptError):
        Agent(ScriptedModel([]), history="hello")  # type: ignore[arg-type]


def test_tools_must_be_a_list() -> None:
    with pytest.raises(ConfigurationError, match=r"tools=\[\.\.\.\]"):
        Agent(ScriptedModel([]), tools=lookup)  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match="list of tools"):
        Agent(ScriptedModel([]), tools="lookup")  # type: ignore[arg-type]


def test_a_non_callable_approver_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="approver"):
        Agent(ScriptedModel([]), approver="yes")  # type: ignore[call-overload]


def test_run_sync_many_times_and_close() -> None:
    model = ScriptedModel([reply(str(i)) for i in range(5)])
    with Agent(model) as agent:
        outputs = [agent.run_sync(f"q{i}").output for i in range(5)]
    assert outputs == ["0", "1", "2", "3", "4"]
    assert model.closed


async def test_run_sync_inside_a_loop_is_refused() -> None:
    with pytest.raises(InvalidInput, match="await run"):
        Agent(ScriptedModel([reply("x")])).run_sync("x")


async def test_async_with_agent_closes_the_client() -> None:
    model = ScriptedModel([reply("x")])
    async with Agent(model) as agent:
        await agent.run("go")
    assert model.closed


def test_run_sync_then_asyncio_run_on_one_agent() -> None:
    agent = Agent(ScriptedModel([reply("a"), reply("b")]))
    assert agent.run_sync("1").output == "a"
    assert asyncio.run(agent.run("2")).output == "b"
    agent.close()
